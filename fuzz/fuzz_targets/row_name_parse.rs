//! Fuzzes the row name parser: any input gets an answer, never a panic, and
//! whatever is accepted prints in a canonical form that parses back to the
//! same name and prints the same again.
#![no_main]

use keysmith::names::RowName;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(name) = text.parse::<RowName>() else {
        return;
    };
    let canonical = name.to_string();
    let again: RowName = canonical
        .parse()
        .unwrap_or_else(|e| panic!("canonical form {canonical:?} of {text:?} does not parse: {e}"));
    assert_eq!(again, name, "{text:?} -> {canonical:?}");
    assert_eq!(again.to_string(), canonical);
    // The JSON parts describe the same name.
    assert_eq!(name.parts().name, canonical);
});
