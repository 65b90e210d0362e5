//! The commands on ACLs and identities: getAcl, setAcl, addauth, whoami.

use crate::acl::{acl_entry_text, parse_acl};
use crate::format::stat_text;
use crate::invocation::Invocation;
use crate::node_commands::{path_argument, subtree, version_option};
use crate::shell::{CommandResult, Failure, Shell};

impl Shell {
    pub(crate) async fn get_acl(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let (acl, stat) = self
            .client()?
            .get_acl(path)
            .await
            .map_err(Failure::on(path))?;
        for entry in &acl {
            println!("{}", acl_entry_text(entry));
        }
        if invocation.flag('s') {
            println!("{}", stat_text(&stat));
        }
        Ok(())
    }

    /// `setAcl [-s] [-v version] [-R] path acl`; `-R` sets it on every descendant too (with the
    /// same version check on each, as zkCli does).
    pub(crate) async fn set_acl(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let (acl, complaints) = parse_acl(invocation.argument(1).ok_or(Failure::Usage)?);
        complaints
            .iter()
            .for_each(|complaint| eprintln!("{complaint}"));
        let version = version_option(invocation)?;
        let client = self.client()?;
        let nodes = match invocation.flag('R') {
            true => subtree(&client, path).await?,
            false => vec![path.to_owned()],
        };
        for node in &nodes {
            let stat = client
                .set_acl(node, &acl, version)
                .await
                .map_err(Failure::on(node))?;
            if invocation.flag('s') && !invocation.flag('R') {
                println!("{}", stat_text(&stat));
            }
        }
        Ok(())
    }

    /// `addauth scheme [auth]`, e.g. `addauth digest user:password`.
    pub(crate) async fn add_auth(&mut self, invocation: &Invocation) -> CommandResult {
        let scheme = invocation.argument(0).ok_or(Failure::Usage)?;
        let auth = invocation.argument(1).unwrap_or_default();
        self.client()?
            .add_auth(scheme, auth.as_bytes())
            .await
            .map_err(|error| Failure::Client(error, None))
    }

    pub(crate) async fn who_am_i(&mut self) -> CommandResult {
        let identities = self
            .client()?
            .who_am_i()
            .await
            .map_err(|error| Failure::Client(error, None))?;
        println!("Auth scheme: User");
        for identity in identities {
            println!("{}: {}", identity.auth_scheme, identity.user);
        }
        Ok(())
    }
}
