//! The recipe scenarios of `recipe_scenarios` against a 3-server ensemble, each scenario's
//! clients (and relays) spread over the members in turn, so that holders, waiters and observers
//! talk to different servers and see each other's writes only through replication.

mod common;
#[macro_use]
mod recipe_scenarios;

use common::{connect, Ensemble};
use recipe_scenarios::Target;
use zoolog_client::{open_acl_unsafe, CreateMode};

/// One ensemble for every scenario, since starting one takes seconds; each scenario runs alone
/// under a chroot of its own, so a failure names its scenario and leaves the others' nodes alone.
#[tokio::test(flavor = "multi_thread")]
async fn every_recipe_holds_its_guarantee_on_an_ensemble() {
    let ensemble = Ensemble::start(&[]);
    let client_ports: Vec<u16> = (1..=Ensemble::SIZE)
        .map(|id| ensemble.member_port(id))
        .collect();
    let setup = connect(&ensemble.hosts()).await;
    macro_rules! run_each {
        ($($scenario:ident),* $(,)?) => {$(
            let chroot = concat!("/", stringify!($scenario));
            setup
                .create(chroot, Some(b""), &open_acl_unsafe(), CreateMode::Persistent)
                .await
                .unwrap();
            eprintln!("scenario {}", stringify!($scenario));
            recipe_scenarios::$scenario(&Target::new(client_ports.clone(), chroot)).await;
        )*};
    }
    every_scenario!(run_each);
}
