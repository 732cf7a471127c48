//! The scenario loader takes arbitrary text and answers `Ok` or an error
//! with a place, never a panic.

use std::path::Path;

use proptest::prelude::*;
use schedlab_scenarios::{file, Params};

const GOOD: &str = include_str!("../../../../scenarios/split_pair.toml");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = file::load_str(&text, Path::new("fuzz.toml"), Params::default());
    }

    /// The good file with one span replaced by junk: mostly errors, each
    /// naming the file.
    #[test]
    fn near_misses_never_panic(at in 0usize..GOOD.len(), len in 0usize..12, junk in "[a-z0-9=\\[\\]{}\",. \n-]{0,12}") {
        let mut s = GOOD.to_string();
        let a = (0..=at).rev().find(|i| s.is_char_boundary(*i)).unwrap();
        let b = (a + len).min(s.len());
        let b = (b..=s.len()).find(|i| s.is_char_boundary(*i)).unwrap();
        s.replace_range(a..b, &junk);
        if let Err(e) = file::load_str(&s, Path::new("near.toml"), Params::default()) {
            prop_assert!(e.to_string().starts_with("near.toml"), "{}", e);
        }
    }
}
