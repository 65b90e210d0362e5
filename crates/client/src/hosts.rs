//! The connect string `"h1:p1,h2:p2[/chroot]"` and the chroot it may carry.

use crate::Error;

const PORT_DEFAULT: u16 = 2181;

/// The servers to try and the subtree every path is relative to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    pub addresses: Vec<String>,
    pub chroot: Chroot,
}

impl ConnectString {
    pub fn parse(text: &str) -> Result<ConnectString, Error> {
        let (host_list, chroot) = match text.find('/') {
            Some(slash) => (&text[..slash], Chroot::parse(&text[slash..])?),
            None => (text, Chroot::default()),
        };
        let addresses = host_list
            .split(',')
            .map(str::trim)
            .filter(|host| !host.is_empty())
            .map(with_port)
            .collect::<Vec<_>>();
        if addresses.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "no host in connect string {text:?}"
            )));
        }
        Ok(ConnectString { addresses, chroot })
    }
}

/// Adds the default port unless the host names one (a bracketed IPv6 address may hold colons).
fn with_port(host: &str) -> String {
    let has_port = host
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
        && (!host.starts_with('[') || host.contains("]:"));
    if has_port {
        host.to_owned()
    } else {
        format!("{host}:{PORT_DEFAULT}")
    }
}

/// A path prefix added to every path sent and removed from every path received.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Chroot {
    /// Empty for no chroot; otherwise starts with '/' and does not end with one.
    prefix: String,
}

impl Chroot {
    fn parse(text: &str) -> Result<Chroot, Error> {
        if text == "/" {
            return Ok(Chroot::default());
        }
        if text.ends_with('/') || text.contains("//") {
            return Err(Error::InvalidArgument(format!("bad chroot {text:?}")));
        }
        Ok(Chroot {
            prefix: text.to_owned(),
        })
    }

    /// The path the server sees for a client path.
    pub fn server_path(&self, client_path: &str) -> Result<String, Error> {
        if !client_path.starts_with('/') {
            return Err(Error::InvalidArgument(format!(
                "path {client_path:?} does not start with '/'"
            )));
        }
        Ok(match (self.prefix.is_empty(), client_path) {
            (true, _) => client_path.to_owned(),
            (false, "/") => self.prefix.clone(),
            (false, _) => format!("{}{client_path}", self.prefix),
        })
    }

    /// The path the caller sees for a server path; paths outside the chroot are left alone.
    pub fn client_path(&self, server_path: &str) -> String {
        if self.prefix.is_empty() {
            return server_path.to_owned();
        }
        match server_path.strip_prefix(&self.prefix) {
            Some("") => "/".to_owned(),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => server_path.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_ports_and_chroot() {
        let parsed = ConnectString::parse("a:1, b ,[::1]:3/app/x").unwrap();
        assert_eq!(parsed.addresses, ["a:1", "b:2181", "[::1]:3"]);
        assert_eq!(parsed.chroot.server_path("/").unwrap(), "/app/x");
        assert_eq!(parsed.chroot.server_path("/n").unwrap(), "/app/x/n");
        assert_eq!(parsed.chroot.client_path("/app/x"), "/");
        assert_eq!(parsed.chroot.client_path("/app/x/n"), "/n");
        assert_eq!(parsed.chroot.client_path("/app/xy"), "/app/xy");
    }

    #[test]
    fn refuses_empty_hosts_and_bad_chroots() {
        assert!(ConnectString::parse("/only").is_err());
        assert!(ConnectString::parse("a:1/x/").is_err());
        assert_eq!(
            ConnectString::parse("a:1/").unwrap().chroot,
            Chroot::default()
        );
        assert!(Chroot::default().server_path("relative").is_err());
    }
}
