//! LEAF's FEMNIST label map: 0–9 digits, 10–35 upper case, 36–61 lower case.

/// Number of FEMNIST classes.
pub const NUM_CLASSES: usize = 62;

/// The character a FEMNIST label stands for, or `None` for a label ≥ 62.
pub fn label_char(label: u8) -> Option<char> {
    match label {
        0..=9 => Some((b'0' + label) as char),
        10..=35 => Some((b'A' + label - 10) as char),
        36..=61 => Some((b'a' + label - 36) as char),
        _ => None,
    }
}

/// The label of a character, the inverse of [`label_char`].
pub fn char_label(c: char) -> Option<u8> {
    match c {
        '0'..='9' => Some(c as u8 - b'0'),
        'A'..='Z' => Some(c as u8 - b'A' + 10),
        'a'..='z' => Some(c as u8 - b'a' + 36),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_map_round_trips() {
        assert_eq!(label_char(0), Some('0'));
        assert_eq!(label_char(10), Some('A'));
        assert_eq!(label_char(35), Some('Z'));
        assert_eq!(label_char(36), Some('a'));
        assert_eq!(label_char(61), Some('z'));
        assert_eq!(label_char(62), None);
        for l in 0..NUM_CLASSES as u8 {
            assert_eq!(char_label(label_char(l).unwrap()), Some(l));
        }
    }
}
