//! Splits a command line into words the way zkCli does: on whitespace, with a word that opens
//! with a double or single quote running to the matching quote (the quotes are dropped), so
//! `set /a "two words"` sets the data to `two words`.

/// The words of `line`; an unterminated quote runs to the end of the line.
pub(crate) fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let (word, after) = next_word(rest);
        words.push(word.to_owned());
        rest = after.trim_start();
    }
    words
}

/// The first word of `text` (which starts with a non-blank) and what follows it.
fn next_word(text: &str) -> (&str, &str) {
    let quote = text
        .chars()
        .next()
        .filter(|first| *first == '"' || *first == '\'');
    match quote {
        Some(quote) => {
            let inner = &text[1..];
            match inner.find(quote) {
                Some(end) => (&inner[..end], &inner[end + 1..]),
                None => (inner, ""),
            }
        }
        None => {
            let end = text.find(char::is_whitespace).unwrap_or(text.len());
            (&text[..end], &text[end..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_words;

    #[test]
    fn splits_on_whitespace_and_keeps_quoted_words_whole() {
        assert_eq!(split_words("  ls   -s /a "), ["ls", "-s", "/a"]);
        assert_eq!(
            split_words(r#"set /a "two words" 'x y'z"#),
            ["set", "/a", "two words", "x y", "z"]
        );
        assert_eq!(split_words("create /a \"open"), ["create", "/a", "open"]);
        assert_eq!(split_words("set /a \"\""), ["set", "/a", ""]);
        assert!(split_words("   ").is_empty());
    }

    #[test]
    fn quotes_inside_a_word_are_kept() {
        assert_eq!(split_words("set /a it's"), ["set", "/a", "it's"]);
    }
}
