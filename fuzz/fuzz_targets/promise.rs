//! The declaration rules and defang: any promise and text get a verdict, and defanged text
//! never declares (SPEC §3: text handed on cannot declare on the agent's behalf).
#![no_main]
use libfuzzer_sys::fuzz_target;
use vigil::verdict::promise::{Promise, Verdict, assess};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (promise, text) = text.split_once('\u{0}').unwrap_or(("DONE", text));
    let Ok(promise) = Promise::new(promise) else {
        return;
    };
    let _ = assess(text, &promise);
    let defanged = vigil::verdict::defang::defang(text);
    assert_ne!(
        assess(&defanged, &promise).verdict,
        Verdict::Declared,
        "defanged text declared: {defanged:?}"
    );
});
