//! The doctor's lines (`settings-merge check`): what is well, what to look at, what is wrong.

/// One line of `check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    Ok(String),
    Warn(String),
    Fail(String),
}

impl Finding {
    pub fn line(&self) -> String {
        match self {
            Finding::Ok(text) => format!("[ok] {text}"),
            Finding::Warn(text) => format!("[warn] {text}"),
            Finding::Fail(text) => format!("[fail] {text}"),
        }
    }
}
