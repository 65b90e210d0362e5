//! ACLs (§7): digest ids, the permission check, the fix-up applied on create/setACL, and getACL
//! redaction. Everything here is a pure function of its arguments.

use base64::Engine;
use sha1::{Digest, Sha1};
use std::net::Ipv6Addr;
use zoolog_proto::codes::perms;
use zoolog_proto::{Acl, ErrorCode, Id};

/// `world:anyone`.
pub fn world_anyone() -> Id {
    Id::new("world", "anyone")
}

/// `[ALL, world:anyone]`.
pub fn open_acl_unsafe() -> Vec<Acl> {
    vec![Acl {
        perms: perms::ALL,
        id: world_anyone(),
    }]
}

/// `[READ, world:anyone]`.
pub fn read_acl_unsafe() -> Vec<Acl> {
    vec![Acl {
        perms: perms::READ,
        id: world_anyone(),
    }]
}

/// The id a `digest` AuthPacket "user:password" earns: `user:base64(sha1("user:password"))`.
pub fn digest_id(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap_or_default();
    let hash = Sha1::digest(user_password.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// Schemes whose ids prove who the caller is, so `auth:` ACL entries expand to them (ip does not).
fn is_authenticated_scheme(scheme: &str) -> bool {
    matches!(scheme, "digest" | "sasl" | "x509")
}

/// §7.5: may a caller holding `identities` do any of `wanted_perms` on a node with `acl`?
pub fn is_permitted(acl: &[Acl], identities: &[Id], wanted_perms: i32, skip_acl: bool) -> bool {
    if skip_acl || acl.is_empty() || identities.iter().any(|id| id.scheme == "super") {
        return true;
    }
    acl.iter()
        .filter(|entry| entry.perms & wanted_perms != 0)
        .any(|entry| grants(&entry.id, identities))
}

fn grants(acl_id: &Id, identities: &[Id]) -> bool {
    if acl_id.scheme == "world" && acl_id.id == "anyone" {
        return true;
    }
    identities
        .iter()
        .filter(|held| held.scheme == acl_id.scheme)
        .any(|held| match acl_id.scheme.as_str() {
            "ip" => ip_matches(&held.id, &acl_id.id),
            "digest" | "sasl" | "x509" => held.id == acl_id.id,
            _ => false,
        })
}

/// An address as bytes (4 for IPv4, 16 for IPv6), with Java's dotted-quad rules for IPv4.
fn address_bytes(text: &str) -> Option<Vec<u8>> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() == 4 {
        return parts.iter().map(|part| part.parse::<u8>().ok()).collect();
    }
    text.parse::<Ipv6Addr>()
        .ok()
        .map(|address| address.octets().to_vec())
}

/// An `ip` ACL expression: address bytes and the number of leading bits that must match.
fn parse_ip_expression(expression: &str) -> Option<(Vec<u8>, usize)> {
    let (address, bits) = match expression.split_once('/') {
        Some((address, bits)) => (address, Some(bits)),
        None => (expression, None),
    };
    let bytes = address_bytes(address)?;
    let bits_max = bytes.len() * 8;
    let bits = match bits {
        None => bits_max,
        Some(bits) => bits
            .parse::<usize>()
            .ok()
            .filter(|&bits| bits <= bits_max)?,
    };
    Some((bytes, bits))
}

fn masked(mut bytes: Vec<u8>, bits: usize) -> Vec<u8> {
    for (index, byte) in bytes.iter_mut().enumerate() {
        let kept_bits = bits.saturating_sub(index * 8).min(8);
        *byte &= !(0xFFu16 >> kept_bits) as u8;
    }
    bytes
}

fn ip_matches(client_address: &str, expression: &str) -> bool {
    let Some((acl_bytes, bits)) = parse_ip_expression(expression) else {
        return false;
    };
    let Some(client_bytes) = address_bytes(client_address) else {
        return false;
    };
    client_bytes.len() == acl_bytes.len() && masked(client_bytes, bits) == masked(acl_bytes, bits)
}

/// Whether an id is well formed for a scheme that may appear in a stored ACL.
fn is_valid_acl_id(id: &Id) -> bool {
    match id.scheme.as_str() {
        "world" => id.id == "anyone",
        // Java splits on ':' dropping trailing empties and wants exactly two parts.
        "digest" => {
            matches!(id.id.split_once(':'), Some((_, hash)) if !hash.is_empty() && !hash.contains(':'))
        }
        "ip" => parse_ip_expression(&id.id).is_some(),
        _ => false,
    }
}

/// §7.4: deduplicate, expand `auth:` to the caller's authenticated ids, validate the rest.
pub fn fix_up(acl: Option<&[Acl]>, identities: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    let acl = acl
        .filter(|acl| !acl.is_empty())
        .ok_or(ErrorCode::InvalidAcl)?;
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for entry in acl {
        if !unique.contains(&entry) {
            unique.push(entry);
        }
    }
    let mut fixed = Vec::with_capacity(unique.len());
    for entry in unique {
        if entry.id.scheme == "auth" {
            let before = fixed.len();
            let authenticated = identities
                .iter()
                .filter(|id| is_authenticated_scheme(&id.scheme));
            fixed.extend(authenticated.map(|id| Acl {
                perms: entry.perms,
                id: id.clone(),
            }));
            if fixed.len() == before {
                return Err(ErrorCode::InvalidAcl);
            }
        } else if is_valid_acl_id(&entry.id) {
            fixed.push(entry.clone());
        } else {
            return Err(ErrorCode::InvalidAcl);
        }
    }
    Ok(fixed)
}

/// §5.6: the ACL as shown to a reader without ADMIN: digest hashes replaced by `x`.
pub fn redacted(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(
            |entry| match (&*entry.id.scheme, entry.id.id.split_once(':')) {
                ("digest", Some((user, _))) => Acl {
                    perms: entry.perms,
                    id: Id::new("digest", &format!("{user}:x")),
                },
                _ => entry.clone(),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id::new(scheme, id),
        }
    }

    #[test]
    fn digest_matches_zookeeper() {
        // zkCli: DigestAuthenticationProvider.generateDigest("super:test")
        assert_eq!(
            digest_id("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
        assert_eq!(
            digest_id("bob:"),
            format!("bob:{}", &digest_id("bob:")[4..])
        );
    }

    #[test]
    fn permission_check() {
        let ip = [Id::new("ip", "10.1.2.3")];
        assert!(is_permitted(
            &[acl(perms::READ, "ip", "10.0.0.0/8")],
            &ip,
            perms::READ,
            false
        ));
        assert!(!is_permitted(
            &[acl(perms::READ, "ip", "10.0.0.0/16")],
            &ip,
            perms::READ,
            false
        ));
        assert!(!is_permitted(
            &[acl(perms::READ, "ip", "10.1.2.3")],
            &ip,
            perms::WRITE,
            false
        ));
        assert!(is_permitted(
            &[acl(perms::READ, "ip", "10.1.2.3")],
            &ip,
            perms::WRITE,
            true
        ));
        assert!(is_permitted(&[], &ip, perms::WRITE, false));
        assert!(is_permitted(
            &[acl(perms::READ, "digest", "a:b")],
            &[Id::new("super", "")],
            perms::ADMIN,
            false
        ));
        let digest = [Id::new("digest", "a:b")];
        assert!(is_permitted(
            &[acl(perms::READ | perms::ADMIN, "digest", "a:b")],
            &digest,
            perms::ADMIN,
            false
        ));
        assert!(!is_permitted(
            &[acl(perms::ALL, "digest", "a:c")],
            &digest,
            perms::READ,
            false
        ));
        let v6 = [Id::new("ip", "0:0:0:0:0:0:0:1")];
        assert!(is_permitted(
            &[acl(perms::READ, "ip", "::1")],
            &v6,
            perms::READ,
            false
        ));
        assert!(!is_permitted(
            &[acl(perms::READ, "ip", "127.0.0.1")],
            &v6,
            perms::READ,
            false
        ));
    }

    #[test]
    fn fix_up_rules() {
        let bob = [Id::new("ip", "1.2.3.4"), Id::new("digest", "bob:h")];
        assert_eq!(fix_up(None, &bob), Err(ErrorCode::InvalidAcl));
        assert_eq!(fix_up(Some(&[]), &bob), Err(ErrorCode::InvalidAcl));
        assert_eq!(
            fix_up(Some(&[acl(31, "auth", "")]), &bob),
            Ok(vec![acl(31, "digest", "bob:h")])
        );
        assert_eq!(
            fix_up(Some(&[acl(31, "auth", "")]), &bob[..1]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fix_up(
                Some(&[acl(31, "world", "anyone"), acl(31, "world", "anyone")]),
                &[]
            ),
            Ok(open_acl_unsafe())
        );
        for bad in [
            ("world", "x"),
            ("digest", "nocolon"),
            ("digest", "a:"),
            ("digest", "a:b:c"),
            ("ip", "1.2.3"),
            ("ip", "1.2.3.4/33"),
            ("super", ""),
            ("foo", "bar"),
        ] {
            assert_eq!(
                fix_up(Some(&[acl(31, bad.0, bad.1)]), &bob),
                Err(ErrorCode::InvalidAcl),
                "{bad:?}"
            );
        }
        assert!(fix_up(
            Some(&[acl(31, "ip", "10.0.0.0/8"), acl(1, "digest", ":h")]),
            &[]
        )
        .is_ok());
    }

    #[test]
    fn redaction_hides_digest_hashes() {
        let shown = redacted(&[
            acl(31, "digest", "bob:hash:more"),
            acl(1, "world", "anyone"),
        ]);
        assert_eq!(
            shown,
            vec![acl(31, "digest", "bob:x"), acl(1, "world", "anyone")]
        );
    }
}
