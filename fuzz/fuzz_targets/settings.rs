//! settings-merge's parser: any bytes are refused or parsed, and what parses renders to a file
//! that parses back to the same settings (the installer never writes what it cannot read).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("settings.json");
    if let Ok(root) = vigil::install::settings::parse(data, path) {
        let rendered = vigil::install::settings::render(&root);
        let again = vigil::install::settings::parse(&rendered, path).expect("a rendered file parses");
        assert_eq!(again, root, "render then parse is the identity");
    }
});
