//! Bearer tokens: made here, kept only as SHA-256 digests (in SQLite and in memory), and
//! checked in constant time.
//!
//! A job token authorises a job's own endpoints; a task token names one device's task.
//! Both are 128 random bits written as 32 lowercase hex digits. The manager hands the
//! token out once and keeps its digest, so a copy of the database (or of the process's
//! memory) holds no usable credential; a presented token that is not of the token's form
//! is refused before anything is hashed.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Hex digits of a token.
pub const TOKEN_LEN: usize = 32;

/// A fresh token: 128 random bits as 32 lowercase hex digits.
pub fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Is `t` of a token's form (32 lowercase hex digits)?
pub fn well_formed(t: &str) -> bool {
    t.len() == TOKEN_LEN && t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The digest a token is kept as (64 hex digits); `None` for a string that is not a
/// token.
pub fn digest(token: &str) -> Option<String> {
    well_formed(token).then(|| hex(&Sha256::digest(token.as_bytes())))
}

/// Does `presented` hash to `stored` (a digest)? Compared in constant time.
pub fn matches(stored: &str, presented: &str) -> bool {
    digest(presented).is_some_and(|d| bool::from(d.as_bytes().ct_eq(stored.as_bytes())))
}

/// Is `presented` the operator's `secret`? Both are hashed first so that the comparison
/// takes the same time whatever their lengths and contents.
pub fn same_secret(secret: &str, presented: &str) -> bool {
    let (a, b) = (
        Sha256::digest(secret.as_bytes()),
        Sha256::digest(presented.as_bytes()),
    );
    bool::from(a.as_slice().ct_eq(b.as_slice()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_its_digest_only() {
        let t = new_token();
        assert!(well_formed(&t));
        let d = digest(&t).unwrap();
        assert_eq!(d.len(), 64);
        assert!(matches(&d, &t));
        assert!(!matches(&d, &new_token()));
        // Not of the form: refused, whatever it hashes to.
        assert_eq!(digest(&t.to_uppercase()), None);
        assert_eq!(digest("nope"), None);
        assert!(!matches(&d, &d));
        // SHA-256 of "0" × 32, as `sha256sum` prints it.
        assert_eq!(
            digest(&"0".repeat(32)).unwrap(),
            "84e0c0eafaa95a34c293f278ac52e45ce537bab5e752a00e6959a13ae103b65a"
        );
    }
}
