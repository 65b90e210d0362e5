//! The recipe scenarios of `recipe_scenarios`, each against a fresh standalone server.

mod common;
#[macro_use]
mod recipe_scenarios;

use recipe_scenarios::Target;

macro_rules! on_a_standalone_server {
    ($($scenario:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $scenario() {
            let server = common::ZkServer::start();
            recipe_scenarios::$scenario(&Target::new(vec![server.port], "")).await;
        }
    )*};
}

every_scenario!(on_a_standalone_server);
