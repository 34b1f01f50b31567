//! The file store on either engine: files that came with messages, kept
//! once per content in the `files` table.
//!
//! Why a table and not a folder beside the database: several processes on
//! one PostgreSQL queue may run on different machines, and a task claimed by
//! any of them must find its files; a table travels with the queue, its
//! backups and its transactions. Files are small by construction (the
//! gateway caps each one, 20 MB by default), which both engines hold well.
//!
//! A file is written with its hash as the key, so the same bytes sent twice
//! are stored once; storing it again moves its `used_at` forward, and files
//! not stored again within `attachments.retention` are pruned.

use async_trait::async_trait;
use herald_core::time::to_millis;
use herald_core::{FileRef, FileStore, StoreError, Timestamp};
use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::statement::{Columns, Statement};
use crate::store::Store;

const PUT_FILE: &str = "\
INSERT INTO files (sha256, content_type, size, bytes, stored_at, used_at) VALUES ($1, $2, $3, $4, $5, $5)
ON CONFLICT (sha256) DO UPDATE SET used_at = excluded.used_at";

const GET_FILE: &str = "SELECT bytes FROM files WHERE sha256 = $1";

const PRUNE_FILES: &str = "\
DELETE FROM files WHERE sha256 IN (SELECT sha256 FROM files WHERE used_at < $1 LIMIT $2)";

/// Rows one prune statement deletes at most, so SQLite's one writer is held
/// briefly.
const BATCH: i64 = 50;

/// The lowercase hex SHA-256 of `bytes`: a stored file's name.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[async_trait]
impl<E: Engine> FileStore for Store<E> {
    async fn put(&self, content_type: &str, bytes: &[u8], now: Timestamp) -> Result<FileRef, StoreError> {
        let sha256 = sha256_hex(bytes);
        Statement::<E::Db>::new(PUT_FILE)
            .text(&sha256)
            .text(content_type)
            .int(i64::try_from(bytes.len()).unwrap_or(i64::MAX))
            .bytes(bytes)
            .int(to_millis(now))
            .execute(self.engine.writes())
            .await?;
        Ok(FileRef {
            sha256,
            content_type: content_type.to_owned(),
            size: bytes.len() as u64,
        })
    }

    async fn get(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = Statement::<E::Db>::new(GET_FILE)
            .text(sha256)
            .fetch_optional(self.engine.reads())
            .await?;
        row.map(|row| row.bytes("bytes")).transpose()
    }

    async fn prune_unused(&self, before: Timestamp) -> Result<u64, StoreError> {
        let mut deleted = 0;
        loop {
            let batch = Statement::<E::Db>::new(PRUNE_FILES)
                .int(to_millis(before))
                .int(BATCH)
                .execute(self.engine.writes())
                .await?;
            deleted += batch;
            if batch < BATCH.unsigned_abs() {
                return Ok(deleted);
            }
            tokio::task::yield_now().await;
        }
    }
}
