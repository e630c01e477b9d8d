//! Deterministic mutation testing on stable: a seed corpus and a few thousand mutations of it
//! (bit flips, truncations, cuts, splices and interesting tokens), each fed to a fuzz target,
//! none of which may panic. Every crate's mutation test runs its targets through
//! [`run_mutations`]; the same seed gives the same inputs on every run, so a failure
//! reproduces.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Tokens that parsers of these formats treat specially.
pub const TOKENS: &[&str] = &[
    "\"",
    "'",
    "{",
    "}",
    "[[",
    "]]",
    "[",
    "]",
    "(",
    ")",
    "\u{0}",
    "\\",
    "\\u",
    "\\u{",
    "\n",
    "=",
    ",",
    " ",
    "\"\"\"",
    "'''",
    "<",
    "</",
    "<!--",
    "-->",
    "<![CDATA[",
    "&#",
    "url(",
    " 2x",
    " 400w",
    "$..",
    "?@",
    "@",
    "*",
    ":",
    "-",
    "1e999",
    "-1",
    "é",
    "\u{feff}",
    "\u{fffd}",
    "𝄞",
    "\r\n",
    "#",
];

/// xorshift64*: deterministic, so a failure reproduces on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: usize) -> usize {
        match bound {
            0 => 0,
            _ => (self.next_u64() % bound as u64) as usize,
        }
    }
}

/// `input` changed once, at a random place; splices take their bytes from `corpus`.
pub fn mutate_once<C: AsRef<[u8]>>(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[C]) {
    let at = rng.below(input.len() + 1);
    match rng.below(8) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] = rng.next_u64() as u8;
        }
        2 => input.truncate(at),
        3 => {
            let end = (at + rng.below(16)).min(input.len());
            input.drain(at..end);
        }
        4 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            input.splice(at..at, token.bytes());
        }
        5 => {
            let run = [
                "a", "[", "(", "{", "<div>", "\"", " ", "0", "url(", ",", "$[",
            ];
            let unit = run[rng.below(run.len())];
            let count = 1 + rng.below(600);
            input.splice(at..at, unit.repeat(count).into_bytes());
        }
        6 if !input.is_empty() => {
            let from = rng.below(input.len());
            let end = (from + rng.below(64)).min(input.len());
            let copy = input[from..end].to_vec();
            input.splice(at..at, copy);
        }
        _ => {
            let other = corpus[rng.below(corpus.len())].as_ref();
            let from = rng.below(other.len());
            let end = (from + rng.below(128)).min(other.len());
            input.splice(at..at, other[from..end].iter().copied());
        }
    }
}

/// `input` as an escaped string, to paste into a regression case.
pub fn escaped(input: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(input))
}

/// Runs target `name` (`run`) on `input`, panicking with the target's name and the input when
/// it panics.
pub fn run_without_panic(name: &str, run: fn(&[u8]), input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| run(input))).is_err() {
        panic!(
            "fuzz target `{name}` panicked on input (lossy UTF-8, {} bytes):\n{}",
            input.len(),
            escaped(input)
        );
    }
}

/// Runs target `name` on every seed of `corpus`, then on `mutations` inputs, each a seed
/// mutated one to four times, panicking with the first input it panics on.
pub fn run_mutations<C: AsRef<[u8]>>(
    rng: &mut Rng,
    name: &str,
    run: fn(&[u8]),
    corpus: &[C],
    mutations: usize,
) {
    for seed in corpus {
        run_without_panic(name, run, seed.as_ref());
    }
    for _ in 0..mutations {
        let mut input = corpus[rng.below(corpus.len())].as_ref().to_vec();
        for _ in 0..1 + rng.below(4) {
            mutate_once(rng, &mut input, corpus);
        }
        run_without_panic(name, run, &input);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mutations() {
        let corpus = ["http://a.test/x.jpg\n", "url,title\n"];
        let mutated = |seed| {
            let mut rng = Rng(seed);
            (0..50)
                .map(|_| {
                    let mut input = corpus[rng.below(2)].as_bytes().to_vec();
                    mutate_once(&mut rng, &mut input, &corpus);
                    input
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(mutated(7), mutated(7));
        assert_ne!(mutated(7), mutated(8));
    }

    #[test]
    #[should_panic(expected = "fuzz target `boom` panicked on input")]
    fn a_panicking_target_is_named_with_its_input() {
        run_mutations(
            &mut Rng(1),
            "boom",
            |data| assert!(data.len() < 3),
            &["ab"],
            100,
        );
    }
}
