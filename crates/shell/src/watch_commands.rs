//! The commands on watches: addWatch, removewatches, printwatches. (get/ls/stat/config `-w`
//! set theirs where they read.)

use zoolog_client::{AddWatchMode, WatcherType};

use crate::invocation::Invocation;
use crate::node_commands::path_argument;
use crate::shell::{CommandResult, Failure, Shell};

impl Shell {
    /// `addWatch [-m PERSISTENT|PERSISTENT_RECURSIVE] path`; recursive unless told otherwise.
    pub(crate) async fn add_watch(&mut self, invocation: &Invocation) -> CommandResult {
        let mode = match invocation.value('m') {
            None | Some("PERSISTENT_RECURSIVE") => AddWatchMode::PersistentRecursive,
            Some("PERSISTENT") => AddWatchMode::Persistent,
            Some(_) => return Err(Failure::Usage),
        };
        let path = path_argument(invocation, 0)?;
        let watch = self
            .client()?
            .add_watch(path, mode)
            .await
            .map_err(Failure::on(path))?;
        self.events.follow_persistent(watch);
        Ok(())
    }

    /// `removewatches path [-c|-d|-a] [-l]`: child, data or any (the default) watches. `-l`
    /// (remove locally even when the server cannot be reached) is accepted, but removal always
    /// goes through the server: this client keeps no watch the server does not know of.
    pub(crate) async fn remove_watches(&mut self, invocation: &Invocation) -> CommandResult {
        let path = path_argument(invocation, 0)?;
        let watcher_type = match (invocation.flag('c'), invocation.flag('d')) {
            (true, false) => WatcherType::Children,
            (false, true) => WatcherType::Data,
            _ => WatcherType::Any,
        };
        self.client()?
            .remove_watches(path, watcher_type)
            .await
            .map_err(Failure::on(path))
    }

    /// `printwatches on|off` turns the printing of events on or off; bare, it says which.
    pub(crate) fn print_watches(&mut self, invocation: &Invocation) -> CommandResult {
        match invocation.argument(0) {
            None => {
                let state = if self.events.enabled() { "on" } else { "off" };
                println!("printwatches is {state}");
            }
            Some("on") => self.events.set_enabled(true),
            Some("off") => self.events.set_enabled(false),
            Some(_) => return Err(Failure::Usage),
        }
        Ok(())
    }
}
