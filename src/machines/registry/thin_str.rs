//! A string held by one pointer: empty is no allocation, anything else a boxed `str` behind
//! it.
//!
//! A registration's metadata and owner are empty in most records, and a `Box<str>` is two
//! words (pointer and length) whether it holds anything or not. Two thin strings instead of
//! two boxed ones take the record from 136 to 120 bytes, and with the `Arc` counts around it
//! from a 160-byte heap chunk to a 144-byte one: 16 bytes less per registration, 160 MB at
//! ten million. What is not empty costs one more pointer to follow and 16 bytes more on the
//! heap, once per record that has it.

use std::fmt;
use std::ops::Deref;

/// An immutable string in one word (see the module documentation).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ThinStr(Option<Box<Box<str>>>);

impl ThinStr {
    pub fn as_str(&self) -> &str {
        self.0.as_deref().map_or("", |s| s)
    }
}

impl Deref for ThinStr {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for ThinStr {
    fn from(s: &str) -> ThinStr {
        ThinStr((!s.is_empty()).then(|| Box::new(Box::from(s))))
    }
}

impl From<String> for ThinStr {
    fn from(s: String) -> ThinStr {
        ThinStr((!s.is_empty()).then(|| Box::new(s.into_boxed_str())))
    }
}

impl From<Box<str>> for ThinStr {
    fn from(s: Box<str>) -> ThinStr {
        ThinStr((!s.is_empty()).then(|| Box::new(s)))
    }
}

impl fmt::Debug for ThinStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_empty_without_allocation_and_the_same_text_back() {
        assert_eq!(std::mem::size_of::<ThinStr>(), 8);
        assert!(ThinStr::from("").0.is_none());
        assert!(ThinStr::from(String::new()).0.is_none());
        for s in ["", "a", r#"{"zone":"eu-1","rack":"r7"}"#] {
            let thin = ThinStr::from(s);
            assert_eq!(thin.as_str(), s);
            assert_eq!(ThinStr::from(s.to_owned()), thin);
            assert_eq!(ThinStr::from(Box::<str>::from(s)), thin);
            assert_eq!(thin.to_string(), s);
            assert_eq!(format!("{thin:?}"), format!("{s:?}"));
            assert_eq!(thin.is_empty(), s.is_empty());
        }
        assert_ne!(ThinStr::from("a"), ThinStr::from("b"));
    }
}
