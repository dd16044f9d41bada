use crate::common::env;
use crate::fixture::Run;

/// The poison message was dead-lettered, then parked in `P.poison` (it names no document).
pub async fn poison_message_is_parked(run: &Run) {
    let conn =
        docpipe_bus::connect(&env("DOCPIPE_AMQP_URL"), "e2e-check", std::time::Duration::from_secs(10)).await.unwrap();
    let topo = docpipe_bus::Topology::new(&run.prefix);
    let ch = conn.create_channel().await.unwrap();
    assert_eq!(topo.depth(&ch, &topo.poison()).await.unwrap(), 1, "poison message parked");
    assert_eq!(topo.depth(&ch, &topo.dead_queue(&topo.chunks())).await.unwrap(), 0, "dead letters drained");
}
