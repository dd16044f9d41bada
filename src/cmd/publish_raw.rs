//! `docpipe publish-raw QUEUE` (testing): publish the JSON on stdin as one persistent message,
//! with a confirm — e.g. a poison message for the fault suite.

use anyhow::{Context, Result};
use docpipe_bus::Publisher;

use crate::cli::Common;
use crate::setup;

pub async fn run(c: &Common, queue: &str) -> Result<()> {
    let mut body = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut body).context("reading stdin")?;
    let value: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|_| serde_json::Value::String(body.clone()));
    let (conn, _) = setup::amqp(c, "docpipe-publish-raw").await?;
    Publisher::new(&conn).await?.publish_all(queue, &[value]).await?;
    println!("published 1 message to {queue}");
    Ok(())
}
