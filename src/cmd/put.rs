//! `docpipe put --bucket B FILES…`: upload files to a bucket (created if missing), keyed
//! `PREFIX + file name`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use backon::Retryable;
use docpipe_ingest::s3 as s3api;

use crate::cli::S3Args;

pub async fn run(bucket: &str, prefix: &str, s3: &S3Args, files: &[PathBuf]) -> Result<()> {
    let client =
        s3api::client(&s3api::S3Config { endpoint: s3.s3_endpoint.clone(), region: s3.s3_region.clone() }).await;
    s3api::ensure_bucket(&client, bucket).await?;
    for f in files {
        let name = f.file_name().with_context(|| format!("{} has no file name", f.display()))?.to_string_lossy();
        let body = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let key = format!("{prefix}{name}");
        // a 5xx or a dropped connection is tried again, as ingest does for its downloads
        (|| s3api::put(&client, bucket, &key, body.clone()))
            .retry(s3api::backoff())
            .when(|e| e.is_retryable())
            .notify(|e, d| tracing::warn!(bucket, key, error = %e, retry_in = ?d, "upload failed; retrying"))
            .await?;
        println!("uploaded s3://{bucket}/{key}");
    }
    Ok(())
}
