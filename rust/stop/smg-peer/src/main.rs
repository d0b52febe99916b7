//! SMG's `StopSequenceDecoder` and `smgpy_stop::StopMatcher` on the same text, same run.
//!
//! SMG's decoder consumes token ids through a tokenizer. To measure its stop matching and not
//! a real detokenizer, the text is cut into ~4-byte (or 1-char) pieces, each piece becomes one
//! "token" of a vocabulary built from the text, and the tokenizer's incremental decoder hands
//! back the piece itself. smgpy's matcher is fed the very same pieces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_tokenizer::traits::{Decoder, Encoder, Encoding, IncrementalDecoder, SpecialTokens, TokenIdType, Tokenizer};
use llm_tokenizer::{SequenceDecoderOutput, StopSequenceConfig, StopSequenceDecoder};
use smgpy_stop::{StopMatcher, StopSet};

#[path = "../../benches/common/mod.rs"]
mod common;

/// A vocabulary of text pieces; decoding a token is returning its piece.
struct PieceTokenizer {
    pieces: Arc<Vec<String>>,
    ids: HashMap<String, TokenIdType>,
    special: SpecialTokens,
}

impl PieceTokenizer {
    fn new(chunks: &[&str]) -> (Self, Vec<TokenIdType>) {
        let mut pieces = Vec::new();
        let mut ids = HashMap::new();
        let seq = chunks
            .iter()
            .map(|c| {
                *ids.entry(c.to_string()).or_insert_with(|| {
                    pieces.push(c.to_string());
                    (pieces.len() - 1) as TokenIdType
                })
            })
            .collect();
        (
            Self {
                pieces: Arc::new(pieces),
                ids,
                special: SpecialTokens::default(),
            },
            seq,
        )
    }
}

struct PassThrough(Arc<Vec<String>>);

impl IncrementalDecoder for PassThrough {
    fn step(&mut self, token_id: TokenIdType) -> anyhow::Result<String> {
        Ok(self.0[token_id as usize].clone())
    }
    fn reset(&mut self) {}
}

impl Encoder for PieceTokenizer {
    fn encode(&self, _input: &str, _add_special_tokens: bool) -> anyhow::Result<Encoding> {
        anyhow::bail!("not used by the stop benchmark")
    }
    fn encode_batch(&self, _inputs: &[&str], _add_special_tokens: bool) -> anyhow::Result<Vec<Encoding>> {
        anyhow::bail!("not used by the stop benchmark")
    }
}

impl Decoder for PieceTokenizer {
    fn decode(&self, token_ids: &[TokenIdType], _skip_special_tokens: bool) -> anyhow::Result<String> {
        Ok(token_ids.iter().map(|&i| self.pieces[i as usize].as_str()).collect())
    }
    fn incremental_decoder(&self, _skip_special_tokens: bool) -> Option<Box<dyn IncrementalDecoder>> {
        Some(Box::new(PassThrough(self.pieces.clone())))
    }
}

impl Tokenizer for PieceTokenizer {
    fn vocab_size(&self) -> usize {
        self.pieces.len()
    }
    fn get_special_tokens(&self) -> &SpecialTokens {
        &self.special
    }
    fn token_to_id(&self, token: &str) -> Option<TokenIdType> {
        self.ids.get(token).copied()
    }
    fn id_to_token(&self, id: TokenIdType) -> Option<String> {
        self.pieces.get(id as usize).cloned()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn run_smg(tok: &Arc<dyn Tokenizer>, stops: &[String], ids: &[TokenIdType]) -> usize {
    let mut config = StopSequenceConfig::default();
    for s in stops {
        config = config.with_stop_sequence(s.clone());
    }
    let mut dec = StopSequenceDecoder::new(tok.clone(), config, false);
    let mut out = 0;
    for &id in ids {
        match dec.process_token(id).unwrap() {
            SequenceDecoderOutput::Text(t) => out += t.len(),
            SequenceDecoderOutput::Held => {}
            SequenceDecoderOutput::Stopped => break,
            SequenceDecoderOutput::StoppedWithText(t) => {
                out += t.len();
                break;
            }
        }
    }
    if let SequenceDecoderOutput::Text(t) | SequenceDecoderOutput::StoppedWithText(t) = dec.flush() {
        out += t.len();
    }
    out
}

fn run_smgpy(set: &Arc<StopSet>, pieces: &[&str]) -> usize {
    let mut m = StopMatcher::from_set(set.clone(), false);
    let mut out = 0;
    for p in pieces {
        match m.push(p) {
            smgpy_stop::StopOutput::Emit(t) => out += t.len(),
            smgpy_stop::StopOutput::Stopped { text, .. } => return out + text.len(),
        }
    }
    out + m.finish().len()
}

/// Best of several runs of at least ~1 s in total, as MB/s.
fn mbps(bytes: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut best = Duration::MAX;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut runs = 0;
    while runs < 3 || (Instant::now() < deadline && runs < 50) {
        let t = Instant::now();
        black_box(f());
        best = best.min(t.elapsed());
        runs += 1;
    }
    bytes as f64 / best.as_secs_f64() / 1e6
}

fn main() {
    let text = common::text(1 << 20);
    println!("| stops | chunks | SMG StopSequenceDecoder MB/s | smgpy StopMatcher MB/s | ratio |");
    println!("|---|---|---|---|---|");
    for n in [1, 4, 64] {
        let stops = common::stop_list(n);
        let set = Arc::new(StopSet::new(stops.clone()).unwrap());
        for (label, size) in [("~4 B", 4), ("1 char", 1)] {
            let pieces = common::chunks(&text, size);
            let (tok, ids) = PieceTokenizer::new(&pieces);
            let tok: Arc<dyn Tokenizer> = Arc::new(tok);
            assert_eq!(run_smg(&tok, &stops, &ids), text.len(), "SMG must pass the whole text");
            assert_eq!(run_smgpy(&set, &pieces), text.len(), "smgpy must pass the whole text");
            let smg = mbps(text.len(), || run_smg(&tok, &stops, &ids));
            let ours = mbps(text.len(), || run_smgpy(&set, &pieces));
            println!("| {n} | {label} | {smg:.1} | {ours:.1} | {:.1}x |", ours / smg);
        }
    }
}
