//! The commands on znodes and their data: ls, get, set, create, delete, deleteall, stat, sync,
//! getEphemerals, getAllChildrenNumber and config.

use std::collections::VecDeque;

use zoolog_client::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode, Op};

use crate::acl::parse_acl;
use crate::format::{data_text, list_text, stat_text};
use crate::invocation::Invocation;
use crate::shell::{CommandResult, Failure, Shell};

/// zkCli's default for `deleteall -b`: deletes per multi.
const DELETE_BATCH_DEFAULT: usize = 1000;
/// Where servers publish their ensemble configuration.
const CONFIG_PATH: &str = "/zookeeper/config";

impl Shell {
    pub(crate) async fn ls(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let client = self.client()?;
        if invocation.flag('R') {
            for node in subtree(&client, path).await? {
                println!("{node}");
            }
            return Ok(());
        }
        let mut children = if invocation.flag('w') {
            let (children, watch) = client
                .get_children_w(path)
                .await
                .map_err(Failure::on(path))?;
            self.events.follow(watch);
            children
        } else {
            client.get_children(path).await.map_err(Failure::on(path))?
        };
        children.sort();
        println!("{}", list_text(&children));
        if invocation.flag('s') {
            print_stat_of(&client, path).await?;
        }
        Ok(())
    }

    pub(crate) async fn get(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let client = self.client()?;
        let (data, stat) = if invocation.flag('w') {
            let (data, stat, watch) = client.get_data_w(path).await.map_err(Failure::on(path))?;
            self.events.follow(watch);
            (data, stat)
        } else {
            client.get_data(path).await.map_err(Failure::on(path))?
        };
        println!("{}", data_text(data.as_deref()));
        if invocation.flag('s') {
            println!("{}", stat_text(&stat));
        }
        Ok(())
    }

    pub(crate) async fn set(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let data = invocation.argument(1).ok_or(Failure::Usage)?;
        let version = version_option(invocation)?;
        let stat = self
            .client()?
            .set_data(path, Some(data.as_bytes()), version)
            .await
            .map_err(Failure::on(path))?;
        if invocation.flag('s') {
            println!("{}", stat_text(&stat));
        }
        Ok(())
    }

    pub(crate) async fn create(&mut self, invocation: &Invocation) -> CommandResult {
        let mode = create_mode(invocation)?;
        let path = match mode.is_sequential() {
            // A sequential name may end in "/": the server appends the counter.
            true => absolute(invocation.argument(0).ok_or(Failure::Usage)?)?,
            false => path_argument(invocation, 0)?,
        };
        // Without a data argument zkCli creates the node with null data, not empty data.
        let data = invocation.argument(1).map(str::as_bytes);
        let acl = match invocation.argument(2) {
            Some(text) => {
                let (acl, complaints) = parse_acl(text);
                complaints
                    .iter()
                    .for_each(|complaint| eprintln!("{complaint}"));
                acl
            }
            None => open_acl_unsafe(),
        };
        let client = self.client()?;
        let created = match ttl_option(invocation)? {
            Some(ttl_ms) => client
                .create_ttl(path, data, &acl, mode, ttl_ms)
                .await
                .map(|(path, _)| path),
            None => client.create(path, data, &acl, mode).await,
        };
        println!("Created {}", created.map_err(Failure::on(path))?);
        Ok(())
    }

    pub(crate) async fn delete(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let version = version_option(invocation)?;
        self.client()?
            .delete(path, version)
            .await
            .map_err(Failure::on(path))
    }

    /// Deletes the node and everything under it, deepest first, in multis of `-b` deletes.
    pub(crate) async fn delete_all(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let batch_size = match invocation.value('b') {
            Some(text) => text
                .parse()
                .ok()
                .filter(|size| *size > 0)
                .ok_or(Failure::Usage)?,
            None => DELETE_BATCH_DEFAULT,
        };
        let client = self.client()?;
        let deepest_first: Vec<String> = subtree(&client, path).await?.into_iter().rev().collect();
        for batch in deepest_first.chunks(batch_size) {
            let ops: Vec<Op> = batch
                .iter()
                .map(|node| Op::Delete {
                    path: node.clone(),
                    version: None,
                })
                .collect();
            client.multi(&ops).await.map_err(|error| {
                let failed_path = match &error {
                    Error::MultiFailed(failure) => batch[failure.failed_op_index].as_str(),
                    _ => path,
                };
                Failure::on(failed_path)(error)
            })?;
        }
        Ok(())
    }

    pub(crate) async fn stat(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let client = self.client()?;
        let stat = if invocation.flag('w') {
            let (stat, watch) = client.exists_w(path).await.map_err(Failure::on(path))?;
            self.events.follow(watch);
            stat
        } else {
            client.exists(path).await.map_err(Failure::on(path))?
        };
        let stat = stat.ok_or_else(|| Failure::on(path)(Error::Server(ErrorCode::NoNode)))?;
        println!("{}", stat_text(&stat));
        Ok(())
    }

    pub(crate) async fn sync(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        self.client()?.sync(path).await.map_err(Failure::on(path))?;
        println!("Sync is OK");
        Ok(())
    }

    /// `getEphemerals [prefix]`: this session's ephemerals, all of them without a prefix.
    pub(crate) async fn ephemerals(&mut self, invocation: &Invocation) -> CommandResult {
        let prefix = match invocation.argument(0) {
            Some(prefix) => absolute(prefix)?,
            None => "/",
        };
        let mut ephemerals = self
            .client()?
            .get_ephemerals(prefix)
            .await
            .map_err(Failure::on(prefix))?;
        ephemerals.sort();
        println!("{}", list_text(&ephemerals));
        Ok(())
    }

    pub(crate) async fn all_children_number(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let count = self
            .client()?
            .get_all_children_number(path)
            .await
            .map_err(Failure::on(path))?;
        println!("{count}");
        Ok(())
    }

    /// `config`: the ensemble configuration node; `-c` shows only what clients connect to.
    pub(crate) async fn config(&mut self, invocation: &Invocation) -> CommandResult {
        let client = self.client()?;
        let (data, stat) = if invocation.flag('w') {
            let (data, stat, watch) = client
                .get_data_w(CONFIG_PATH)
                .await
                .map_err(Failure::on(CONFIG_PATH))?;
            self.events.follow(watch);
            (data, stat)
        } else {
            client
                .get_data(CONFIG_PATH)
                .await
                .map_err(Failure::on(CONFIG_PATH))?
        };
        let config = data_text(data.as_deref());
        match invocation.flag('c') {
            true => println!("{}", client_config(&config)),
            false => println!("{config}"),
        }
        if invocation.flag('s') {
            println!("{}", stat_text(&stat));
        }
        Ok(())
    }
}

/// The node and all its descendants, level by level, children in name order (ls -R's order).
/// A descendant deleted meanwhile is skipped; the node itself missing is an error.
pub(crate) async fn subtree(client: &Client, path: &str) -> Result<Vec<String>, Failure> {
    let mut nodes = Vec::new();
    let mut pending = VecDeque::from([path.to_owned()]);
    while let Some(node) = pending.pop_front() {
        let mut children = match client.get_children(&node).await {
            Ok(children) => children,
            Err(Error::Server(ErrorCode::NoNode)) if node != path => continue,
            Err(error) => return Err(Failure::on(&node)(error)),
        };
        children.sort();
        pending.extend(children.iter().map(|child| child_path(&node, child)));
        nodes.push(node);
    }
    Ok(nodes)
}

pub(crate) fn child_path(parent: &str, child: &str) -> String {
    match parent {
        "/" => format!("/{child}"),
        _ => format!("{parent}/{child}"),
    }
}

async fn print_stat_of(client: &Client, path: &str) -> CommandResult {
    let stat = client.exists(path).await.map_err(Failure::on(path))?;
    let stat = stat.ok_or_else(|| Failure::on(path)(Error::Server(ErrorCode::NoNode)))?;
    println!("{}", stat_text(&stat));
    Ok(())
}

/// Argument `index`, which must be a znode path.
pub(crate) fn path_argument(invocation: &Invocation, index: usize) -> Result<&str, Failure> {
    let path = absolute(invocation.argument(index).ok_or(Failure::Usage)?)?;
    if path.len() > 1 && path.ends_with('/') {
        return Err(Failure::Message(
            "Path must not end with / character".into(),
        ));
    }
    Ok(path)
}

fn absolute(path: &str) -> Result<&str, Failure> {
    match path.starts_with('/') {
        true => Ok(path),
        false => Err(Failure::Message("Path must start with / character".into())),
    }
}

/// `-v version`; none means any version.
pub(crate) fn version_option(invocation: &Invocation) -> Result<Option<i32>, Failure> {
    invocation
        .value('v')
        .map(|text| text.parse().map_err(|_| Failure::Usage))
        .transpose()
}

fn ttl_option(invocation: &Invocation) -> Result<Option<i64>, Failure> {
    invocation
        .value('t')
        .map(|text| text.parse().map_err(|_| Failure::Usage))
        .transpose()
}

/// The mode `create`'s flags ask for, refusing the combinations zkCli refuses.
fn create_mode(invocation: &Invocation) -> Result<CreateMode, Failure> {
    let (sequential, ephemeral, container) = (
        invocation.flag('s'),
        invocation.flag('e'),
        invocation.flag('c'),
    );
    let ttl = invocation.value('t').is_some();
    if container && (sequential || ephemeral) {
        return Err(Failure::Message(
            "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential."
                .into(),
        ));
    }
    if ttl && ephemeral {
        return Err(Failure::Message(
            "TTLs cannot be used with Ephemeral znodes".into(),
        ));
    }
    if ttl && container {
        return Err(Failure::Message(
            "TTLs cannot be used with Container znodes".into(),
        ));
    }
    Ok(match (sequential, ephemeral, container, ttl) {
        (_, _, true, _) => CreateMode::Container,
        (true, _, _, true) => CreateMode::PersistentSequentialWithTtl,
        (false, _, _, true) => CreateMode::PersistentWithTtl,
        (true, true, _, _) => CreateMode::EphemeralSequential,
        (true, false, _, _) => CreateMode::PersistentSequential,
        (false, true, _, _) => CreateMode::Ephemeral,
        (false, false, _, _) => CreateMode::Persistent,
    })
}

/// `config -c`: the configuration's version and the servers' client addresses, as
/// `version host:port,host:port`; nothing when the server publishes no configuration.
fn client_config(config: &str) -> String {
    let mut version = None;
    let mut addresses = Vec::new();
    for line in config.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim() == "version" {
            version = Some(value.trim());
        } else if key.trim().starts_with("server.") {
            // server.1=host:2888:3888:participant;clientHost:clientPort
            if let Some((_, client_address)) = value.split_once(';') {
                addresses.push(client_address.trim().to_owned());
            }
        }
    }
    match version {
        Some(version) => format!("{version} {}", addresses.join(",")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invocation(text: &str) -> Invocation {
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        Invocation::parse(crate::invocation::find_command("create").unwrap(), &words).unwrap()
    }

    #[test]
    fn create_flags_pick_the_mode() {
        assert!(matches!(
            create_mode(&invocation("/a")),
            Ok(CreateMode::Persistent)
        ));
        assert!(matches!(
            create_mode(&invocation("-e -s /a")),
            Ok(CreateMode::EphemeralSequential)
        ));
        assert!(matches!(
            create_mode(&invocation("-c /a")),
            Ok(CreateMode::Container)
        ));
        assert!(matches!(
            create_mode(&invocation("-s -t 10 /a")),
            Ok(CreateMode::PersistentSequentialWithTtl)
        ));
        assert!(create_mode(&invocation("-c -s /a")).is_err());
        assert!(create_mode(&invocation("-e -t 5 /a")).is_err());
    }

    #[test]
    fn child_paths_join_under_the_root_too() {
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
    }

    #[test]
    fn client_config_lists_client_addresses_after_the_version() {
        let config = "server.1=h1:2888:3888:participant;0.0.0.0:2181\n\
                      server.2=h2:2888:3888:participant;h2:2182\nversion=100000000";
        assert_eq!(client_config(config), "100000000 0.0.0.0:2181,h2:2182");
        assert_eq!(client_config(""), "");
    }
}
