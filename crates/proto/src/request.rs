//! Client requests: decoded from (opcode, body) and encoded back, multi and multiRead included.

use crate::codes::OpCode;
use crate::jute::{Jute, Reader};
use crate::records::*;
use crate::DecodeError;

/// One client request, by opcode. `Check` is only meaningful inside a multi; the server answers a
/// standalone one with UNIMPLEMENTED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create(CreateRequest),
    Create2(CreateRequest),
    CreateContainer(CreateRequest),
    CreateTtl(CreateTtlRequest),
    Delete(DeleteRequest),
    /// Body is a buffer holding the path; wire-identical to a ustring.
    DeleteContainer(PathRequest),
    Exists(PathWatchRequest),
    GetData(PathWatchRequest),
    SetData(SetDataRequest),
    GetAcl(PathRequest),
    SetAcl(SetAclRequest),
    GetChildren(PathWatchRequest),
    GetChildren2(PathWatchRequest),
    Sync(PathRequest),
    Ping,
    Check(CheckVersionRequest),
    /// Each element is a Create*, Delete, SetData or Check.
    Multi(Vec<Request>),
    /// Each element is a GetData or GetChildren.
    MultiRead(Vec<Request>),
    Reconfig(ReconfigRequest),
    CheckWatches(WatchesRequest),
    RemoveWatches(WatchesRequest),
    Auth(AuthPacket),
    SetWatches(SetWatches),
    SetWatches2(SetWatches2),
    Sasl(SaslToken),
    GetEphemerals(GetEphemeralsRequest),
    GetAllChildrenNumber(PathRequest),
    AddWatch(AddWatchRequest),
    WhoAmI,
    CloseSession,
}

impl Request {
    pub fn opcode(&self) -> OpCode {
        match self {
            Request::Create(_) => OpCode::Create,
            Request::Create2(_) => OpCode::Create2,
            Request::CreateContainer(_) => OpCode::CreateContainer,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::DeleteContainer(_) => OpCode::DeleteContainer,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl(_) => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::Sync(_) => OpCode::Sync,
            Request::Ping => OpCode::Ping,
            Request::Check(_) => OpCode::Check,
            Request::Multi(_) => OpCode::Multi,
            Request::MultiRead(_) => OpCode::MultiRead,
            Request::Reconfig(_) => OpCode::Reconfig,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::Auth(_) => OpCode::Auth,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::Sasl(_) => OpCode::Sasl,
            Request::GetEphemerals(_) => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::CloseSession => OpCode::CloseSession,
        }
    }

    /// True for requests that change replicated state and so go through the log.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Create(_)
                | Request::Create2(_)
                | Request::CreateContainer(_)
                | Request::CreateTtl(_)
                | Request::Delete(_)
                | Request::DeleteContainer(_)
                | Request::SetData(_)
                | Request::SetAcl(_)
                | Request::Check(_)
                | Request::Multi(_)
                | Request::Reconfig(_)
                | Request::CloseSession
        )
    }

    /// Decodes the body that follows a RequestHeader. Bytes after the record are ignored, as the
    /// reference server does.
    pub fn decode(opcode: i32, body: &[u8]) -> Result<Request, DecodeError> {
        let opcode = OpCode::from_i32(opcode).ok_or(DecodeError::UnknownOpcode { opcode })?;
        Self::read_body(opcode, &mut Reader::new(body))
    }

    fn read_body(opcode: OpCode, reader: &mut Reader<'_>) -> Result<Request, DecodeError> {
        fn read<T: Jute>(reader: &mut Reader<'_>) -> Result<T, DecodeError> {
            T::read_from(reader)
        }
        Ok(match opcode {
            OpCode::Create => Request::Create(read(reader)?),
            OpCode::Create2 => Request::Create2(read(reader)?),
            OpCode::CreateContainer => Request::CreateContainer(read(reader)?),
            OpCode::CreateTtl => Request::CreateTtl(read(reader)?),
            OpCode::Delete => Request::Delete(read(reader)?),
            OpCode::DeleteContainer => Request::DeleteContainer(read(reader)?),
            OpCode::Exists => Request::Exists(read(reader)?),
            OpCode::GetData => Request::GetData(read(reader)?),
            OpCode::SetData => Request::SetData(read(reader)?),
            OpCode::GetAcl => Request::GetAcl(read(reader)?),
            OpCode::SetAcl => Request::SetAcl(read(reader)?),
            OpCode::GetChildren => Request::GetChildren(read(reader)?),
            OpCode::GetChildren2 => Request::GetChildren2(read(reader)?),
            OpCode::Sync => Request::Sync(read(reader)?),
            OpCode::Ping => Request::Ping,
            OpCode::Check => Request::Check(read(reader)?),
            OpCode::Multi => Request::Multi(read_multi(reader, OpCode::Multi)?),
            OpCode::MultiRead => Request::MultiRead(read_multi(reader, OpCode::MultiRead)?),
            OpCode::Reconfig => Request::Reconfig(read(reader)?),
            OpCode::CheckWatches => Request::CheckWatches(read(reader)?),
            OpCode::RemoveWatches => Request::RemoveWatches(read(reader)?),
            OpCode::Auth => Request::Auth(read(reader)?),
            OpCode::SetWatches => Request::SetWatches(read(reader)?),
            OpCode::SetWatches2 => Request::SetWatches2(read(reader)?),
            OpCode::Sasl => Request::Sasl(read(reader)?),
            OpCode::GetEphemerals => Request::GetEphemerals(read(reader)?),
            OpCode::GetAllChildrenNumber => Request::GetAllChildrenNumber(read(reader)?),
            OpCode::AddWatch => Request::AddWatch(read(reader)?),
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::CloseSession => Request::CloseSession,
            OpCode::Notification | OpCode::CreateSession | OpCode::Error => {
                return Err(DecodeError::UnknownOpcode {
                    opcode: opcode.code(),
                })
            }
        })
    }

    /// Encodes the body (without the RequestHeader).
    pub fn write_body(&self, out: &mut Vec<u8>) {
        match self {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => {
                r.write_to(out)
            }
            Request::CreateTtl(r) => r.write_to(out),
            Request::Delete(r) => r.write_to(out),
            Request::DeleteContainer(r)
            | Request::GetAcl(r)
            | Request::Sync(r)
            | Request::GetAllChildrenNumber(r) => r.write_to(out),
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => r.write_to(out),
            Request::SetData(r) => r.write_to(out),
            Request::SetAcl(r) => r.write_to(out),
            Request::Check(r) => r.write_to(out),
            Request::Multi(ops) | Request::MultiRead(ops) => write_multi(ops, out),
            Request::Reconfig(r) => r.write_to(out),
            Request::CheckWatches(r) | Request::RemoveWatches(r) => r.write_to(out),
            Request::Auth(r) => r.write_to(out),
            Request::SetWatches(r) => r.write_to(out),
            Request::SetWatches2(r) => r.write_to(out),
            Request::Sasl(r) => r.write_to(out),
            Request::GetEphemerals(r) => r.write_to(out),
            Request::AddWatch(r) => r.write_to(out),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
        }
    }

    /// The whole frame payload: RequestHeader then body.
    pub fn encode(&self, xid: i32) -> Vec<u8> {
        let mut out = Vec::new();
        RequestHeader {
            xid,
            opcode: self.opcode().code(),
        }
        .write_to(&mut out);
        self.write_body(&mut out);
        out
    }
}

/// Whether `opcode` may appear inside a multi of kind `multi` (write ops in 14, reads in 22).
pub fn allowed_in_multi(multi: OpCode, opcode: OpCode) -> bool {
    match multi {
        OpCode::Multi => matches!(
            opcode,
            OpCode::Create
                | OpCode::Create2
                | OpCode::CreateContainer
                | OpCode::CreateTtl
                | OpCode::Delete
                | OpCode::SetData
                | OpCode::Check
        ),
        OpCode::MultiRead => matches!(opcode, OpCode::GetData | OpCode::GetChildren),
        _ => false,
    }
}

fn read_multi(reader: &mut Reader<'_>, multi: OpCode) -> Result<Vec<Request>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let header = MultiHeader::read_from(reader)?;
        if header.done {
            return Ok(ops);
        }
        let opcode = OpCode::from_i32(header.opcode)
            .filter(|&opcode| allowed_in_multi(multi, opcode))
            .ok_or(DecodeError::BadMultiOp {
                opcode: header.opcode,
            })?;
        ops.push(Request::read_body(opcode, reader)?);
    }
}

fn write_multi(ops: &[Request], out: &mut Vec<u8>) {
    for op in ops {
        MultiHeader {
            opcode: op.opcode().code(),
            done: false,
            err: -1,
        }
        .write_to(out);
        op.write_body(out);
    }
    MultiHeader {
        opcode: -1,
        done: true,
        err: -1,
    }
    .write_to(out);
}
