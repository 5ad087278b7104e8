//! Per-task completion tokens (SPEC §3, P4): one fresh token per task, an instruction that
//! never contains the assembled marker, and the marker `<<<PREFIX_DONE_TOKEN>>>` itself.

use crate::error::{Error, Result};

pub(crate) const DEFAULT_PREFIX: &str = "VIGIL";

/// A task token: 16 to 128 of `[A-Za-z0-9_-]`; `Token::generate` makes 32 lowercase hex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// 128 bits from the operating system's random source, as 32 lowercase hex characters.
    pub(crate) fn generate() -> Result<Token> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::Io(format!("cannot read the OS random source: {e}")))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn parse(raw: &str) -> Result<Token> {
        let valid = (16..=128).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(Error::usage(format!(
                "the token {raw:?} is not 16 to 128 letters, digits, `_` or `-`; make one with `promise-matcher token new`"
            )));
        }
        Ok(Token(raw.to_string()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// A marker prefix: 1 to 32 ASCII letters and digits (default `VIGIL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefix(String);

impl Prefix {
    pub fn parse(raw: &str) -> Result<Prefix> {
        if raw.is_empty() || raw.len() > 32 || !raw.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(Error::usage(format!(
                "the prefix {raw:?} is not 1 to 32 ASCII letters and digits, e.g. --prefix VIGIL"
            )));
        }
        Ok(Prefix(raw.to_string()))
    }

    /// `<<<PREFIX_`: the part of every marker that defang breaks.
    pub(crate) fn opener(&self) -> String {
        format!("<<<{}_", self.0)
    }

    /// Where defang splices its hyphen: before the middle character (`VIG-IL`).
    pub(crate) fn splice_at(&self) -> usize {
        self.0.len().div_ceil(2)
    }
}

impl Default for Prefix {
    fn default() -> Prefix {
        Prefix(DEFAULT_PREFIX.to_string())
    }
}

/// The assembled marker `<<<PREFIX_DONE_TOKEN>>>`.
pub fn marker(prefix: &Prefix, token: &Token) -> String {
    format!("{}DONE_{}>>>", prefix.opener(), token.as_str())
}

/// The instruction to append to a task's prompt. It gives the marker in two pieces with words
/// between them, so neither the text nor its flattened form (whitespace removed) nor its echo
/// on a screen ever holds the assembled marker.
pub(crate) fn instruction(prefix: &Prefix, token: &Token) -> String {
    format!(
        "When you have fully completed this task, and only then, end your reply with one final \
         line that holds only the completion marker. Build the marker by writing `{first}` \
         immediately followed by `DONE_{token}>>>`, joined into one unbroken token with no space, \
         quote or other character between the two parts. Never write the marker for any other \
         reason: not to quote it, not to explain it, and not when the task is only partly done.",
        first = prefix.opener(),
        token = token.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_32_lowercase_hex_and_differ() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(
            a.as_str()
                .bytes()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        );
        assert_ne!(a, b);
    }

    #[test]
    fn short_or_spaced_tokens_are_refused() {
        assert!(Token::parse("abc").is_err());
        assert!(Token::parse("0123456789abcdef 0").is_err());
        assert!(Token::parse("0123456789abcdef").is_ok());
    }

    #[test]
    fn hyphen_goes_before_the_middle_character() {
        assert_eq!(Prefix::default().splice_at(), 3);
        assert_eq!(Prefix::parse("X").unwrap().splice_at(), 1);
        assert_eq!(Prefix::parse("ABCD").unwrap().splice_at(), 2);
    }
}
