#!/usr/bin/env python3
"""The crawl benchmark's runner: one timed run of one tool, or the tables of a results file.

  crawl_measure.py run --section S --tool T --setting X --base URL --results F.jsonl \
      [--expect-pages P[,P2]] [--rate-pages R] [--expect-images I] [--timeout SEC] [--log FILE] [--na-exit2] \
      [--verify 'SHELL CMD'] -- CMD ARGS...
  crawl_measure.py table F.jsonl          # markdown tables, one per section

A run: the server's counters are zeroed (GET BASE/stats/reset), CMD starts in a session of its
own, and its process tree is sampled every 0.2 s from /proc until it exits (or is killed at
--timeout). Then BASE/stats is read, and the tool's own count is taken from the last line of
CMD's stdout (or of the --verify command's) that reads `RESULT {"pages": N, "images": M, ...}`.

  seconds   wall clock from start to exit of CMD
  CPU s     user+sys of the whole process tree: the larger of (a) the rusage of CMD and every
            descendant reaped below it (wait4), and (b) the sum, over every process seen in the
            tree, of its last sampled utime+stime (catches processes reparented away, such as a
            browser's helpers; misses at most the last 0.2 s of a short-lived one)
  peak PSS  the largest sampled sum of Pss (smaps_rollup) over the tree, in MB
  pages/s   pages the tool reports it processed (or --rate-pages) / seconds; --expect-pages
            may list several counts that pass (a chain's closing 404 counted as a page or not)
  other CPU the machine's busy CPU seconds during the run less the tree's and the server's: other
            work on the machine (a build, say), which the figures then include as noise
  status    ok when CMD exited 0 and reported the expected pages and images; n/a (unsupported)
            for exit code 2 with --na-exit2 (a profile key the binary does not know); else FAIL

Each run appends one JSON line to --results and prints a one-line summary on stderr.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def machine_busy():
    """CPU seconds the whole machine spent busy so far (user+nice+system+irq+softirq)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / TICK


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        kids.setdefault(int(rest[1]), []).append((int(d), rest))
    return kids


class Sampler(threading.Thread):
    """Samples CPU and PSS of the tree under `root` (and of its session, for reparented kids)."""

    def __init__(self, root):
        super().__init__(daemon=True)
        self.root = root
        self.cpu = {}  # (pid, starttime) -> last utime+stime seen, s
        self.peak_pss_kb = 0
        self.peak_procs = 0
        self.stop = threading.Event()

    def sample(self):
        kids = children_map()
        seen, stack, pss = set(), [self.root], 0
        # Processes of the run's session that were reparented (to init) count too.
        for procs in kids.values():
            for pid, rest in procs:
                if int(rest[3]) == self.root and pid != self.root:  # rest[3] = session id
                    stack.append(pid)
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            for child, _ in kids.get(pid, []):
                stack.append(child)
        for procs in kids.values():
            for pid, rest in procs:
                if pid in seen:
                    self.cpu[(pid, rest[19])] = (int(rest[11]) + int(rest[12])) / TICK
        for pid in seen:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            pss += int(line.split()[1])
                            break
            except OSError:
                pass
        self.peak_pss_kb = max(self.peak_pss_kb, pss)
        self.peak_procs = max(self.peak_procs, len(seen))

    def run(self):
        while not self.stop.wait(0.2):
            try:
                self.sample()
            except Exception:  # a process vanishing mid-read is normal
                pass


def last_result(text):
    found = None
    for line in text.splitlines():
        if line.startswith("RESULT "):
            try:
                found = json.loads(line[7:])
            except ValueError:
                pass
    return found


def first_error(log):
    """The first `error: ...` line of a run's log, for an n/a row."""
    try:
        with open(log) as f:
            for line in f:
                if "error:" in line:
                    return line.split("error:", 1)[1].strip()[:70]
    except (OSError, TypeError):
        pass
    return None


def cmd_run(a, cmd):
    base = a.base.rstrip("/")
    get_json(base + "/stats/reset")
    log = open(a.log, "w") if a.log else None
    started = time.monotonic()
    busy0 = machine_busy()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log or subprocess.DEVNULL,
                            start_new_session=True, text=True)
    sampler = Sampler(proc.pid)
    sampler.start()
    out_lines = []

    def reader():
        for line in proc.stdout:
            out_lines.append(line)
            if log:
                log.write(line)
                log.flush()

    rt = threading.Thread(target=reader, daemon=True)
    rt.start()
    timed_out = False

    def killer():
        nonlocal timed_out
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(a.timeout, killer)
    timer.start()
    _, status, ru = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - started
    busy = machine_busy() - busy0
    timer.cancel()
    sampler.stop.set()
    sampler.join()
    # Whatever the run left in its session (it should be nothing) goes now.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    rt.join(timeout=5)
    code = os.waitstatus_to_exitcode(status)
    server = get_json(base + "/stats")
    stdout = "".join(out_lines)
    result = last_result(stdout)
    if a.verify:
        v = subprocess.run(a.verify, shell=True, capture_output=True, text=True, timeout=120)
        if log:
            log.write(f"--- verify ({v.returncode}): {v.stdout}{v.stderr}")
        result = last_result(v.stdout) or result
    cpu_wait4 = ru.ru_utime + ru.ru_stime
    cpu_sampled = sum(sampler.cpu.values())
    cpu = max(cpu_wait4, cpu_sampled)
    other_cpu = max(0.0, busy - cpu - server["server_cpu_s"])
    pages = (result or {}).get("pages")
    images = (result or {}).get("images")
    if code == 2 and a.na_exit2:
        status_text = "n/a (unsupported)"
        why = first_error(a.log)
        if why:
            status_text = f"n/a (unsupported: {why})"
    elif timed_out:
        status_text = f"FAIL: killed after {a.timeout:.0f} s"
    elif code != 0:
        status_text = f"FAIL: exit {code}"
    elif result is None:
        status_text = "FAIL: no RESULT line"
    elif a.expect_pages is not None and pages not in a.expect_pages:
        status_text = f"FAIL: {pages} pages, expected {' or '.join(map(str, a.expect_pages))}"
    elif a.expect_images is not None and images != a.expect_images:
        status_text = f"FAIL: {images} images, expected {a.expect_images}"
    else:
        status_text = "ok"
    ok = status_text == "ok"
    rate_pages = a.rate_pages if a.rate_pages is not None else pages
    row = {
        "section": a.section, "tool": a.tool, "setting": a.setting, "status": status_text,
        "exit": code, "pages": pages, "images": images, "seconds": round(seconds, 3),
        "pages_per_s": round(rate_pages / seconds, 2) if ok and rate_pages else None,
        "cpu_s": round(cpu, 2), "cpu_wait4_s": round(cpu_wait4, 2), "cpu_sampled_s": round(cpu_sampled, 2),
        "cpu_s_per_page": round(cpu / rate_pages, 4) if ok and rate_pages else None,
        "peak_pss_mb": round(sampler.peak_pss_kb / 1024, 1),
        "max_rss_mb": round(ru.ru_maxrss / 1024, 1), "peak_procs": sampler.peak_procs,
        "other_cpu_s": round(other_cpu, 2), "server": server, "log": a.log,
    }
    with open(a.results, "a") as f:
        f.write(json.dumps(row) + "\n")
    srv = server
    print(f"  {a.tool} [{a.setting}]: {status_text}; {pages} pages, {images} images in {seconds:.1f} s"
          + (f" = {row['pages_per_s']} pages/s" if row["pages_per_s"] else "")
          + f"; CPU {cpu:.1f} s; peak PSS {row['peak_pss_mb']} MB; server: {srv['pages_ok']} pages ok,"
          f" {srv['not_found']} 404, {srv['by_kind']['img']} image requests, max {srv['max_in_flight']} in flight,"
          f" {srv['connections']} connections, {srv['server_cpu_s']} CPU s; other load {other_cpu:.1f} CPU s", file=sys.stderr, flush=True)
    return 0


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def cmd_table(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    sections = []
    for r in rows:
        if r["section"] not in sections:
            sections.append(r["section"])
    for s in sections:
        print(f"\n### {s}\n")
        print("| tool | setting | pages | seconds | pages/s | CPU s/page | peak PSS MB | max in flight | other load CPU s | status |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if r["section"] != s:
                continue
            na = r["status"].startswith("n/a")
            print(f"| {r['tool']} | {r['setting']} | {fmt(r['pages'], 'd') if not na else '-'} |"
                  f" {fmt(r['seconds'], '.1f') if not na else '-'} | {fmt(r['pages_per_s'], '.1f')} |"
                  f" {fmt(r['cpu_s_per_page'], '.4f')} | {fmt(r['peak_pss_mb'], '.0f') if not na else '-'} |"
                  f" {r['server']['max_in_flight'] if not na else '-'} | {fmt(r.get('other_cpu_s'), '.1f') if not na else '-'} |"
                  f" {r['status']} |")
    return 0


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["table"] and len(argv) == 2:
        return cmd_table(argv[1])
    if argv[:1] != ["run"] or "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = argv.index("--")
    ap = argparse.ArgumentParser()
    for name in ("--section", "--tool", "--setting", "--base", "--results"):
        ap.add_argument(name, required=True)
    ap.add_argument("--expect-pages", type=lambda v: [int(x) for x in v.split(",")])
    ap.add_argument("--rate-pages", type=int)
    ap.add_argument("--expect-images", type=int)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--log")
    ap.add_argument("--verify")
    ap.add_argument("--na-exit2", action="store_true")
    a = ap.parse_args(argv[1:sep])
    return cmd_run(a, argv[sep + 1:])


if __name__ == "__main__":
    sys.exit(main())
