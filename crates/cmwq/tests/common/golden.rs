//! A text compared with the file that holds what it was (a golden file),
//! shared by the cmwq and cmwq-cli tests (the CLI includes this file by
//! path). `CMWQ_BLESS=1` writes `text` to the file first.

/// Asserts that `text` equals the contents of `path` (after writing it
/// there under `CMWQ_BLESS=1`), showing both when not.
pub fn assert_golden(path: &str, text: &str) {
    if std::env::var_os("CMWQ_BLESS").is_some() {
        std::fs::write(path, text).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap();
    assert!(
        text == want,
        "--- got ---\n{text}\n--- want ({path}) ---\n{want}"
    );
}
