//! The shell's own command-line options, zkCli's syntax:
//! `[-server host:port[,…][/chroot]] [-timeout ms] [-r] [-c "command"] [command words…]`.

/// What `zoolog shell` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// The connect string as typed; the prompt shows it.
    pub server: String,
    pub session_timeout_ms: u32,
    pub read_only_allowed: bool,
    /// One command to run instead of a session of many: `-c "ls /"` or trailing words.
    pub command: Option<Command>,
}

/// A command given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `-c "ls -s /a"`: a line still to be split into words.
    Line(String),
    /// `ls -s /a` after the options: already split by the caller's shell.
    Words(Vec<String>),
}

pub(crate) const USAGE: &str =
    "usage: zoolog shell [-server host:port[,host:port...][/chroot]] [-timeout ms] [-r] [-c command | command args...]";

/// zkCli's defaults.
const SERVER_DEFAULT: &str = "localhost:2181";
const SESSION_TIMEOUT_MS_DEFAULT: u32 = 30_000;

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            server: SERVER_DEFAULT.to_owned(),
            session_timeout_ms: SESSION_TIMEOUT_MS_DEFAULT,
            read_only_allowed: false,
            command: None,
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "-server" => options.server = value_of(arg, rest.next())?.to_owned(),
                "-timeout" => {
                    let text = value_of(arg, rest.next())?;
                    options.session_timeout_ms = text
                        .parse()
                        .map_err(|_| format!("-timeout wants milliseconds, not {text:?}"))?;
                }
                "-r" => options.read_only_allowed = true,
                "-c" => {
                    options.command = Some(Command::Line(value_of(arg, rest.next())?.to_owned()))
                }
                option if option.starts_with('-') => {
                    return Err(format!("unknown option {option}"))
                }
                _ => {
                    let words = std::iter::once(arg).chain(rest).cloned().collect();
                    options.command = Some(Command::Words(words));
                    break;
                }
            }
        }
        Ok(options)
    }
}

fn value_of<'a>(option: &str, value: Option<&'a String>) -> Result<&'a str, String> {
    value
        .map(String::as_str)
        .ok_or_else(|| format!("{option} needs a value"))
}

#[cfg(test)]
mod tests {
    use super::{Command, Options};

    fn parse(args: &[&str]) -> Result<Options, String> {
        Options::parse(&args.iter().map(|arg| arg.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_are_zkclis() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.server, "localhost:2181");
        assert_eq!(options.session_timeout_ms, 30_000);
        assert!(!options.read_only_allowed);
        assert_eq!(options.command, None);
    }

    #[test]
    fn reads_every_option_and_a_command() {
        let options = parse(&[
            "-server",
            "h:1,h:2/app",
            "-timeout",
            "5000",
            "-r",
            "-c",
            "ls /",
        ])
        .unwrap();
        assert_eq!(options.server, "h:1,h:2/app");
        assert_eq!(options.session_timeout_ms, 5000);
        assert!(options.read_only_allowed);
        assert_eq!(options.command, Some(Command::Line("ls /".into())));
    }

    #[test]
    fn trailing_words_are_the_command_even_when_they_look_like_options() {
        let options = parse(&["-server", "h:1", "ls", "-s", "/"]).unwrap();
        assert_eq!(
            options.command,
            Some(Command::Words(vec!["ls".into(), "-s".into(), "/".into()]))
        );
    }

    #[test]
    fn refuses_unknown_options_and_missing_values() {
        assert!(parse(&["-x"]).is_err());
        assert!(parse(&["-server"]).is_err());
        assert!(parse(&["-timeout", "soon"]).is_err());
    }
}
