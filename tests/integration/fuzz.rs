//! The I/O crate's fuzz targets ([`scrape::fuzz`]) on stable: a seed corpus per target and
//! deterministic mutations of it, shared with the core's mutation test
//! ([`scrape_core::fuzz::mutation`]), none of which may panic or break what the reader promises.

use std::io::Write;

use scrape::fuzz::TARGETS;
use scrape_core::fuzz::mutation::{Rng, run_mutations};

/// Mutated inputs per target.
const MUTATIONS: usize = 5_000;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The seed corpus of target `name`.
fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "urllist" => {
            let text = "# photos\nhttp://a.test/1.jpg\n\n  https://a.test/2.png?x=1  \r\nftp://a.test/3.gif\nnot a url\nhttp://a.test/1.jpg\n";
            let csv = "url,title,\"tags\"\nhttp://a.test/1.jpg,One,\"a,b\"\n\"http://a.test/2.jpg\",\"Two \"\"quoted\"\"\",\n,,\n";
            let tsv = "title\turl\nOne\thttp://a.test/1.jpg\n\t\n";
            let jsonl = "{\"url\": \"http://a.test/1.jpg\", \"n\": 1, \"tags\": [\"a\"]}\n{\"url\": 7}\n[1]\n{\"title\": \"no url\"}\n";
            let mut invalid_utf8 = b"http://a.test/\xff\xfe.jpg\nhttp://a.test/ok.jpg\n".to_vec();
            invalid_utf8.extend_from_slice("url\n\u{feff}http://a.test/bom.jpg\n".as_bytes());
            let nul = b"http://a.test/a\0b.jpg\n\0\0\0\nurl,\0\n".to_vec();
            let open_quote =
                b"url,title\n\"http://a.test/1.jpg,never closed\nhttp://a.test/2.jpg,x\n".to_vec();
            let mut overlong = vec![b'a'; 70 * 1024];
            overlong.extend_from_slice(b"\nhttp://a.test/after.jpg\n");
            // One line four times the bound, in a few hundred bytes: what a gzip bomb is.
            let mut bomb = b"url\nhttp://a.test/".to_vec();
            bomb.extend(std::iter::repeat_n(b'x', 256 * 1024));
            vec![
                text.as_bytes().to_vec(),
                csv.as_bytes().to_vec(),
                tsv.as_bytes().to_vec(),
                jsonl.as_bytes().to_vec(),
                invalid_utf8,
                nul,
                open_quote,
                overlong,
                Vec::new(),
                gzip(text.as_bytes()),
                gzip(csv.as_bytes()),
                gzip(&bomb),
            ]
        }
        other => panic!("no seed corpus for fuzz target `{other}`"),
    }
}

#[test]
fn every_io_fuzz_target_has_a_seed_corpus_and_a_fuzz_folder_entry() {
    for target in TARGETS {
        assert!(!seeds(target.name).is_empty(), "{}", target.name);
        let file = crate::support::repo(&format!("fuzz/fuzz_targets/{}.rs", target.name));
        assert!(
            file.is_file(),
            "fuzz target `{}` has no {}",
            target.name,
            file.display()
        );
    }
}

#[test]
fn the_url_list_seeds_hold_a_gzip_bomb_of_one_line_past_the_bound() {
    let seeds = seeds("urllist");
    let bomb = seeds.last().unwrap();
    assert!(bomb.len() < 4096, "{}", bomb.len());
    let mut unpacked = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bomb[..]), &mut unpacked)
        .unwrap();
    assert!(unpacked.len() > 4 * scrape::input::urllist::MAX_LINE_BYTES);
}

#[test]
fn no_io_fuzz_target_panics_on_its_seeds_or_their_mutations() {
    let mut rng = Rng(0x5EED_0F11_57AB_CDEF);
    for target in TARGETS {
        let corpus = seeds(target.name);
        run_mutations(&mut rng, target.name, target.run, &corpus, MUTATIONS);
    }
}
