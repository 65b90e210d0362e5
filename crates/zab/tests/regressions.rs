//! Regression tests for bugs the simulator (`zoolog-sim`) found; each names its seed.

use std::collections::BTreeMap;

use zoolog_zab::{Action, Config, Input, MemberRole, Message, PeerState, Recovered, Vote, Zab};

fn config(me: u64, participants: u64) -> Config {
    let members: BTreeMap<u64, MemberRole> = (1..=participants)
        .map(|id| (id, MemberRole::Participant))
        .collect();
    Config::new(me, members, 10)
}

fn vote(from: u64, round: u64, leader: u64) -> Input {
    Input::Message {
        from,
        message: Message::Vote {
            round,
            vote: Vote {
                epoch: 0,
                position: 0,
                leader,
            },
            state: PeerState::Looking,
            observer: false,
        },
    }
}

fn sent_to(actions: &[Action], to: u64) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Send { to: t, message } if *t == to => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Seed 29: a server that had decided to follow (not yet established) answered a looking
/// server's vote with a vote in its own, older round; the looking server answered that as a
/// vote from behind, and so on forever, and duplicated messages multiplied the chains into
/// a storm of millions of messages.
#[test]
fn an_unestablished_learner_answers_votes_in_the_senders_round() {
    let (mut zab, _) = Zab::new(config(1, 3), Recovered::default(), 0);
    zab.handle(vote(2, 1, 3), 1);
    zab.handle(vote(3, 1, 3), 1);
    let actions = zab.handle(vote(2, 7, 2), 2);
    let answers = sent_to(&actions, 2);
    assert!(!answers.is_empty(), "a looking peer gets an answer");
    for answer in answers {
        match answer {
            Message::Vote { round, .. } => assert_eq!(round, 7),
            other => panic!("unexpected answer {other:?}"),
        }
    }
}
