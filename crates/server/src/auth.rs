//! Authentication schemes of the default ZooKeeper server: digest (with the super digest) and
//! ip. Identities belong to a connection and are never carried over to the next one.

use zoolog_proto::{AuthPacket, Id};

/// The identities an auth packet grants, or `None` when the scheme is unknown (AUTHFAILED).
/// Digest never fails: a wrong password yields an id that matches no ACL.
pub fn authenticate(packet: &AuthPacket, super_digest: Option<&str>) -> Option<Vec<Id>> {
    match packet.scheme.as_str() {
        "digest" => {
            let credentials = String::from_utf8_lossy(packet.auth.as_deref().unwrap_or_default());
            let id = zoolog_tree::acl::digest_id(&credentials);
            let mut ids = vec![Id::new("digest", &id)];
            if super_digest == Some(id.as_str()) {
                ids.push(Id::new("super", ""));
            }
            Some(ids)
        }
        // Every connection already holds ip:<address>; the packet adds nothing.
        "ip" => Some(Vec::new()),
        _ => None,
    }
}
