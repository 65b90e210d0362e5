//! The command table (names, options, usage lines as zkCli prints them) and the parsing of one
//! command's words into options and arguments.

/// One command: its name, its options in getopt style (`"sv:"`: flag `-s`, `-v` with a value),
/// and the argument part of its usage line.
pub(crate) struct CommandSpec {
    pub name: &'static str,
    pub options: &'static str,
    pub arguments: &'static str,
}

impl CommandSpec {
    /// The usage line, as zkCli prints it after a malformed command.
    pub fn usage(&self) -> String {
        format!("{} {}", self.name, self.arguments)
    }
}

const fn command(
    name: &'static str,
    options: &'static str,
    arguments: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        options,
        arguments,
    }
}

/// Every command, in zkCli's (alphabetical) help order.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    command("addWatch", "m:", "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE"),
    command("addauth", "", "scheme auth"),
    command("close", "", ""),
    command("config", "cws", "[-c] [-w] [-s]"),
    command("connect", "", "host:port"),
    command("create", "sect:", "[-s] [-e] [-c] [-t ttl] path [data] [acl]"),
    command("delete", "v:", "[-v version] path"),
    command("deleteall", "b:", "path [-b batch size]"),
    command("delquota", "nbNB", "[-n|-b|-N|-B] path"),
    command("get", "sw", "[-s] [-w] path"),
    command("getAcl", "s", "[-s] path"),
    command("getAllChildrenNumber", "", "path"),
    command("getEphemerals", "", "path"),
    command("help", "", ""),
    command("history", "", ""),
    command("listquota", "", "path"),
    command("ls", "swR", "[-s] [-w] [-R] path"),
    command("printwatches", "", "on|off"),
    command("quit", "", ""),
    command("reconfig", "sv:", "[-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]"),
    command("redo", "", "cmdno"),
    command("removewatches", "cdal", "path [-c|-d|-a] [-l]"),
    command("set", "sv:", "[-s] [-v version] path data"),
    command("setAcl", "sv:R", "[-s] [-v version] [-R] path acl"),
    command("setquota", "n:b:N:B:", "-n|-b|-N|-B val path"),
    command("stat", "w", "[-w] path"),
    command("sync", "", "path"),
    command("version", "", ""),
    command("whoami", "", ""),
];

pub(crate) fn find_command(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS.iter().find(|spec| spec.name == name)
}

/// zkCli's help: a synopsis, then every usage line.
pub(crate) fn help_text() -> String {
    let mut text = String::from("ZooKeeper -server host:port -timeout ms -r -c cmd args\n");
    for spec in COMMANDS {
        text.push_str(&format!("\t{}\n", spec.usage()));
    }
    text
}

/// A command's options and arguments. Options may come anywhere among the arguments, as with
/// zkCli (`removewatches /a -d`); a word is an option only if it is `-` and one letter.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Invocation {
    flags: Vec<char>,
    values: Vec<(char, String)>,
    pub arguments: Vec<String>,
}

impl Invocation {
    /// Parses the words after the command name; `Err` names the offending option.
    pub fn parse(spec: &CommandSpec, words: &[String]) -> Result<Invocation, String> {
        let mut invocation = Invocation::default();
        let mut rest = words.iter();
        while let Some(word) = rest.next() {
            let Some(letter) = option_letter(word) else {
                invocation.arguments.push(word.clone());
                continue;
            };
            match option_kind(spec.options, letter) {
                Some(OptionKind::Flag) => invocation.flags.push(letter),
                Some(OptionKind::Valued) => {
                    let value = rest
                        .next()
                        .ok_or_else(|| format!("Missing argument for option: {letter}"))?;
                    invocation.values.push((letter, value.clone()));
                }
                None => return Err(format!("Unrecognized option: {word}")),
            }
        }
        Ok(invocation)
    }

    pub fn flag(&self, letter: char) -> bool {
        self.flags.contains(&letter)
    }

    pub fn value(&self, letter: char) -> Option<&str> {
        self.values
            .iter()
            .find(|(option, _)| *option == letter)
            .map(|(_, value)| value.as_str())
    }

    pub fn argument(&self, index: usize) -> Option<&str> {
        self.arguments.get(index).map(String::as_str)
    }
}

enum OptionKind {
    Flag,
    Valued,
}

fn option_letter(word: &str) -> Option<char> {
    let mut chars = word.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some('-'), Some(letter), None) if letter.is_ascii_alphabetic() => Some(letter),
        _ => None,
    }
}

fn option_kind(options: &str, letter: char) -> Option<OptionKind> {
    let at = options.find(letter)?;
    Some(match options[at + 1..].starts_with(':') {
        true => OptionKind::Valued,
        false => OptionKind::Flag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn options_come_anywhere_and_values_follow_their_option() {
        let spec = find_command("set").unwrap();
        let invocation = Invocation::parse(spec, &words("/a -v 3 data -s")).unwrap();
        assert!(invocation.flag('s'));
        assert_eq!(invocation.value('v'), Some("3"));
        assert_eq!(invocation.arguments, ["/a", "data"]);
    }

    #[test]
    fn negative_numbers_and_long_words_are_arguments() {
        let spec = find_command("set").unwrap();
        let invocation = Invocation::parse(spec, &words("/a -12 -v -1")).unwrap();
        assert_eq!(invocation.arguments, ["/a", "-12"]);
        assert_eq!(invocation.value('v'), Some("-1"));
    }

    #[test]
    fn unknown_options_and_missing_values_are_refused() {
        let spec = find_command("ls").unwrap();
        assert_eq!(
            Invocation::parse(spec, &words("-x /")),
            Err("Unrecognized option: -x".into())
        );
        let spec = find_command("delete").unwrap();
        assert!(Invocation::parse(spec, &words("/a -v")).is_err());
    }

    #[test]
    fn usage_lines_read_like_zkclis() {
        assert_eq!(
            find_command("ls").unwrap().usage(),
            "ls [-s] [-w] [-R] path"
        );
        assert_eq!(find_command("whoami").unwrap().usage(), "whoami ");
        assert!(help_text().contains("\tset [-s] [-v version] path data\n"));
    }
}
