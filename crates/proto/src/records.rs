//! Every jute record of the ZooKeeper 3.9 client protocol, field for field in wire order.

use crate::jute_record;

/// Nullable node data: `None` is the null buffer (length −1), distinct from empty.
pub type Data = Option<Vec<u8>>;
/// Nullable node data as a server's tree holds it and hands it out, without copying.
pub type SharedData = Option<bytes::Bytes>;

jute_record! {
    /// An identity: `world:anyone`, `digest:user:hash`, `ip:10.0.0.0/8`, `auth:`…
    pub struct Id { pub scheme: String, pub id: String }
}

jute_record! {
    pub struct Acl { pub perms: i32, pub id: Id }
}

jute_record! {
    /// Always 68 bytes; note `pzxid` comes last.
    pub struct Stat {
        pub czxid: i64,
        pub mzxid: i64,
        pub ctime: i64,
        pub mtime: i64,
        pub version: i32,
        pub cversion: i32,
        pub aversion: i32,
        pub ephemeral_owner: i64,
        pub data_length: i32,
        pub num_children: i32,
        pub pzxid: i64,
    }
}

jute_record! {
    pub struct ClientInfo { pub auth_scheme: String, pub user: String }
}

jute_record! {
    pub struct RequestHeader { pub xid: i32, pub opcode: i32 }
}

jute_record! {
    pub struct ReplyHeader { pub xid: i32, pub zxid: i64, pub err: i32 }
}

jute_record! {
    pub struct MultiHeader { pub opcode: i32, pub done: bool, pub err: i32 }
}

jute_record! {
    pub struct AuthPacket { pub auth_type: i32, pub scheme: String, pub auth: Data }
}

jute_record! {
    pub struct WatcherEvent { pub event_type: i32, pub state: i32, pub path: String }
}

jute_record! {
    pub struct ErrorResponse { pub err: i32 }
}

jute_record! {
    /// Also the body of create2 (15) and createContainer (19).
    pub struct CreateRequest { pub path: String, pub data: Data, pub acl: Option<Vec<Acl>>, pub flags: i32 }
}

jute_record! {
    pub struct CreateTtlRequest {
        pub path: String,
        pub data: Data,
        pub acl: Option<Vec<Acl>>,
        pub flags: i32,
        pub ttl: i64,
    }
}

jute_record! {
    pub struct CreateResponse { pub path: String }
}

jute_record! {
    pub struct Create2Response { pub path: String, pub stat: Stat }
}

jute_record! {
    pub struct DeleteRequest { pub path: String, pub version: i32 }
}

jute_record! {
    /// Also the body of exists (3), getChildren (8), getChildren2 (12).
    pub struct PathWatchRequest { pub path: String, pub watch: bool }
}

jute_record! {
    /// The body of exists, setData and setACL replies: one Stat.
    pub struct StatResponse { pub stat: Stat }
}

jute_record! {
    pub struct GetDataResponse { pub data: SharedData, pub stat: Stat }
}

jute_record! {
    pub struct SetDataRequest { pub path: String, pub data: Data, pub version: i32 }
}

jute_record! {
    /// The body of getACL, sync, getAllChildrenNumber requests and of sync replies.
    pub struct PathRequest { pub path: String }
}

jute_record! {
    pub struct GetAclResponse { pub acl: Vec<Acl>, pub stat: Stat }
}

jute_record! {
    pub struct SetAclRequest { pub path: String, pub acl: Option<Vec<Acl>>, pub version: i32 }
}

jute_record! {
    pub struct GetChildrenResponse { pub children: Vec<String> }
}

jute_record! {
    pub struct GetChildren2Response { pub children: Vec<String>, pub stat: Stat }
}

jute_record! {
    pub struct GetAllChildrenNumberResponse { pub total_number: i32 }
}

jute_record! {
    pub struct CheckVersionRequest { pub path: String, pub version: i32 }
}

jute_record! {
    pub struct ReconfigRequest {
        pub joining_servers: Option<String>,
        pub leaving_servers: Option<String>,
        pub new_members: Option<String>,
        pub cur_config_id: i64,
    }
}

jute_record! {
    pub struct SetWatches {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
    }
}

jute_record! {
    pub struct SetWatches2 {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
        pub persistent_watches: Vec<String>,
        pub persistent_recursive_watches: Vec<String>,
    }
}

jute_record! {
    pub struct AddWatchRequest { pub path: String, pub mode: i32 }
}

jute_record! {
    /// The body of checkWatches (17) and removeWatches (18).
    pub struct WatchesRequest { pub path: String, pub watcher_type: i32 }
}

jute_record! {
    pub struct GetEphemeralsRequest { pub prefix_path: Option<String> }
}

jute_record! {
    pub struct GetEphemeralsResponse { pub ephemerals: Vec<String> }
}

jute_record! {
    pub struct WhoAmIResponse { pub client_info: Vec<ClientInfo> }
}

jute_record! {
    /// GetSASLRequest and SetSASLResponse share this layout.
    pub struct SaslToken { pub token: Data }
}

impl Stat {
    pub const BYTES: usize = 68;
}

impl Id {
    pub fn new(scheme: &str, id: &str) -> Self {
        Id {
            scheme: scheme.to_owned(),
            id: id.to_owned(),
        }
    }
}
