//! The handshake records, in both forms: with and without the trailing readOnly byte.

use crate::jute::{Jute, Reader};
use crate::DecodeError;

/// `read_only` is `None` for the old 44-byte form (go-zookeeper); the reply must then be the old
/// form too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    pub read_only: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    pub read_only: Option<bool>,
}

impl ConnectRequest {
    pub fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let reader = &mut Reader::new(frame);
        let protocol_version = i32::read_from(reader)?;
        let last_zxid_seen = i64::read_from(reader)?;
        let timeout_ms = i32::read_from(reader)?;
        let session_id = i64::read_from(reader)?;
        let (password, read_only) = read_credentials_tail(reader)?;
        Ok(ConnectRequest {
            protocol_version,
            last_zxid_seen,
            timeout_ms,
            session_id,
            password,
            read_only,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(45);
        self.protocol_version.write_to(&mut out);
        self.last_zxid_seen.write_to(&mut out);
        self.timeout_ms.write_to(&mut out);
        self.session_id.write_to(&mut out);
        write_credentials_tail(&self.password, self.read_only, &mut out);
        out
    }
}

impl ConnectResponse {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(37);
        self.protocol_version.write_to(&mut out);
        self.timeout_ms.write_to(&mut out);
        self.session_id.write_to(&mut out);
        write_credentials_tail(&self.password, self.read_only, &mut out);
        out
    }

    pub fn decode(frame: &[u8]) -> Result<Self, DecodeError> {
        let reader = &mut Reader::new(frame);
        let protocol_version = i32::read_from(reader)?;
        let timeout_ms = i32::read_from(reader)?;
        let session_id = i64::read_from(reader)?;
        let (password, read_only) = read_credentials_tail(reader)?;
        Ok(ConnectResponse {
            protocol_version,
            timeout_ms,
            session_id,
            password,
            read_only,
        })
    }

    /// The reply to a reconnect that failed (expired, unknown or wrong password): timeout 0,
    /// session 0 and a zeroed password, so the Java, C and Go clients all see "expired".
    pub fn expired(read_only: Option<bool>) -> Self {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 0,
            session_id: 0,
            password: vec![0; 16],
            read_only,
        }
    }
}

/// Both handshake records end with the password and, in the new form only, the readOnly byte.
fn write_credentials_tail(password: &[u8], read_only: Option<bool>, out: &mut Vec<u8>) {
    (password.len() as i32).write_to(out);
    out.extend_from_slice(password);
    if let Some(read_only) = read_only {
        read_only.write_to(out);
    }
}

/// The readOnly byte is there exactly when the frame goes on after the password.
fn read_credentials_tail(reader: &mut Reader<'_>) -> Result<(Vec<u8>, Option<bool>), DecodeError> {
    let password = Option::<Vec<u8>>::read_from(reader)?.unwrap_or_default();
    let read_only = if reader.remaining() > 0 {
        Some(bool::read_from(reader)?)
    } else {
        None
    };
    Ok((password, read_only))
}
