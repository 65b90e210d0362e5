//! `reconfig`: asks the ensemble to change its membership, with zkCli's options: incremental
//! (`-add`, `-remove`) or the whole new membership (`-members`, or `-file` with `server.N=`
//! lines), `-v` the configuration version (hex) it applies to, `-s` the Stat of the new
//! configuration's node. The server decides; its refusal (e.g. reconfiguration disabled) is
//! printed as zkCli prints it.

use crate::format::{data_text, stat_text};
use crate::invocation::Invocation;
use crate::shell::{CommandResult, Failure, Shell};

/// The largest `-file` read: a dynamic configuration is a few lines per server.
const CONFIG_FILE_BYTES_MAX: u64 = 1 << 20;

/// What `reconfig` asks for, its words parsed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Change {
    joining: Option<String>,
    leaving: Option<String>,
    members: Option<String>,
    file: Option<String>,
    /// -1: whichever configuration is current.
    from_config: i64,
}

impl Shell {
    pub(crate) async fn reconfig(&mut self, invocation: &Invocation) -> CommandResult {
        let mut change = parse_change(invocation)?;
        if let Some(file) = change.file.take() {
            change.members = Some(members_from_file(&file)?);
        }
        let (config, stat) = self
            .client()?
            .reconfig(
                change.joining.as_deref(),
                change.leaving.as_deref(),
                change.members.as_deref(),
                change.from_config,
            )
            .await
            .map_err(|error| Failure::Client(error, None))?;
        println!(
            "Committed new configuration:\n{}",
            data_text(config.as_deref())
        );
        if invocation.flag('s') {
            println!("{}", stat_text(&stat));
        }
        Ok(())
    }
}

/// The long options come through as arguments (`-add`, then its value); `-s` and `-v` are
/// the invocation's own.
fn parse_change(invocation: &Invocation) -> Result<Change, Failure> {
    let mut change = Change {
        from_config: -1,
        ..Change::default()
    };
    let mut words = invocation.arguments.iter();
    while let Some(word) = words.next() {
        let slot = match word.as_str() {
            "-add" => &mut change.joining,
            "-remove" => &mut change.leaving,
            "-members" => &mut change.members,
            "-file" => &mut change.file,
            other => return Err(Failure::Message(format!("Unrecognized option: {other}"))),
        };
        let value = words.next().ok_or_else(|| {
            Failure::Message(format!("Missing argument for option: {}", &word[1..]))
        })?;
        // zkCli lowercases the server lists (not the file name).
        *slot = Some(match word.as_str() {
            "-file" => value.clone(),
            _ => value.to_lowercase(),
        });
    }
    let whole = change.members.is_some() || change.file.is_some();
    let incremental = change.joining.is_some() || change.leaving.is_some();
    if !whole && !incremental {
        return Err(Failure::Usage);
    }
    if let Some(version) = invocation.value('v') {
        change.from_config = i64::from_str_radix(version, 16).map_err(|_| {
            Failure::Message("-v must be followed by a long (configuration version)".into())
        })?;
    }
    if whole && incremental {
        return Err(Failure::Message(
            "Can't use -file or -members together with -add or -remove (mixing incremental and \
             non-incremental modes is not allowed)"
                .into(),
        ));
    }
    if change.members.is_some() && change.file.is_some() {
        return Err(Failure::Message(
            "Can't use -file and -members together (conflicting non-incremental modes)".into(),
        ));
    }
    Ok(change)
}

/// The membership a dynamic configuration file lists: its `server.N=…` lines (with the
/// `group.`/`weight.` lines of hierarchical quorums), joined by commas.
fn members_from_file(file: &str) -> Result<String, Failure> {
    let processing = |reason: String| Failure::Message(format!("Error processing {file}{reason}"));
    let metadata = std::fs::metadata(file).map_err(|error| processing(error.to_string()))?;
    if metadata.len() > CONFIG_FILE_BYTES_MAX {
        return Err(processing(format!(
            " is larger than {CONFIG_FILE_BYTES_MAX} bytes"
        )));
    }
    let text = std::fs::read_to_string(file).map_err(|error| processing(error.to_string()))?;
    let members: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| {
            ["server.", "group.", "weight."]
                .iter()
                .any(|prefix| line.starts_with(prefix))
        })
        .map(|line| line.replace(char::is_whitespace, "").to_lowercase())
        .collect();
    if members.is_empty() {
        return Err(processing(" lists no server".into()));
    }
    Ok(members.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invocation::find_command;

    fn change(line: &str) -> Result<Change, Failure> {
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        let invocation = Invocation::parse(find_command("reconfig").unwrap(), &words)
            .map_err(Failure::Message)?;
        parse_change(&invocation)
    }

    fn message(result: Result<Change, Failure>) -> String {
        match result {
            Err(Failure::Message(message)) => message,
            Err(Failure::Usage) => "usage".into(),
            _ => "no failure".into(),
        }
    }

    #[test]
    fn incremental_and_whole_changes_parse_like_zkclis() {
        let parsed = change("-add SERVER.5=h:1:2;3 -remove 3,4 -v 1a")
            .ok()
            .unwrap();
        assert_eq!(parsed.joining.as_deref(), Some("server.5=h:1:2;3"));
        assert_eq!(parsed.leaving.as_deref(), Some("3,4"));
        assert_eq!(parsed.from_config, 0x1a);
        assert_eq!(
            change("-members server.1=a:1:2").ok().unwrap().from_config,
            -1
        );
    }

    #[test]
    fn conflicting_or_missing_modes_are_refused() {
        assert_eq!(message(change("-s")), "usage");
        assert!(message(change("-members x -add y")).starts_with("Can't use -file or -members"));
        assert!(message(change("-members x -file y")).starts_with("Can't use -file and -members"));
        assert_eq!(
            message(change("-add x -v zz")),
            "-v must be followed by a long (configuration version)"
        );
        assert_eq!(message(change("-bogus x")), "Unrecognized option: -bogus");
        assert_eq!(message(change("-add")), "Missing argument for option: add");
    }
}
