// SPDX-License-Identifier: MIT OR Apache-2.0
//! Hex input as people paste it: `xxd -p` output, `0x`-prefixed words,
//! bytes separated by spaces, colons or newlines.

/// The bytes of a hex string; an error names the first bad character.
pub fn parse(text: &str) -> Result<Vec<u8>, String> {
    let mut digits = Vec::with_capacity(text.len());
    for token in text.split(|c: char| c.is_whitespace() || c == ':' || c == ',') {
        let token = token
            .strip_prefix("0x")
            .or_else(|| token.strip_prefix("0X"))
            .unwrap_or(token);
        for (i, c) in token.char_indices() {
            let value = c
                .to_digit(16)
                .ok_or_else(|| format!("not a hex digit: {c:?} in {token:?} (at {i})"))?;
            digits.push(value as u8);
        }
    }
    if digits.len() % 2 != 0 {
        return Err(format!(
            "odd number of hex digits ({}): each byte takes two",
            digits.len()
        ));
    }
    Ok(digits
        .chunks_exact(2)
        .map(|pair| (pair[0] << 4) | pair[1])
        .collect())
}

/// Lowercase hex, 32 bytes a line, as `xxd -p` prints.
pub fn format(bytes: &[u8]) -> String {
    bytes
        .chunks(32)
        .map(|line| line.iter().map(|b| format!("{b:02x}")).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_spellings() {
        assert_eq!(parse("01 02\n0a:ff").unwrap(), vec![1, 2, 10, 255]);
        assert_eq!(parse("0x0102 0XfF").unwrap(), vec![1, 2, 255]);
        assert_eq!(parse("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn refuses_bad_input_clearly() {
        assert!(parse("0g").unwrap_err().contains("'g'"));
        assert!(parse("012").unwrap_err().contains("odd number"));
    }

    #[test]
    fn format_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(parse(&format(&bytes)).unwrap(), bytes);
    }
}
