//! The frame generator: a seeded PRNG and the random, odd, broken and mutated lines the fuzzer
//! writes to kiwi's stdin.
//!
//! Generation depends on the seed only (never on what kiwi answered), so a seed names one exact
//! stream of generated frames; only the answers to kiwi's own requests, which the reader thread
//! interleaves, depend on timing. The generator does not label its frames: what each line must
//! get is derived from the bytes by `oracle`, so a mutation that happens to produce a valid
//! request is held to the same rules as a frame built on purpose.

use serde_json::{Value, json};

/// splitmix64: tiny, fast, and the same on every platform and `rand` version.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..n` (the modulo bias is irrelevant for fuzzing).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// In `lo..hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo) as u64) as usize
    }

    pub fn per_mille(&mut self, p: u64) -> bool {
        self.below(1000) < p
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Mixes a segment index into a seed so every kiwi process gets its own stream.
pub fn derive_seed(seed: u64, salt: u64) -> u64 {
    let mut r = Rng::new(seed ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93));
    r.next_u64()
}

pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Commands that finish at once and touch nothing outside the work dir.
const SHELL_COMMANDS: &[&str] = &[
    "echo hi",
    "true",
    "false",
    "printf abc",
    "exit 3",
    "sleep 0.05",
    "cat",
    "ls",
    "seq 1 200",
    "echo err 1>&2",
    "echo ünï 😀",
];

/// Things kiwi would never see from a sane client, for mutations and token soup.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "1e999",
    "-",
    "\"id\"",
    "\"method\"",
    "\"prompt\"",
    "\"cancel\"",
    "\"2.0\"",
    "\\u",
    "\\ud800",
    "\\u0000",
    "{}",
    "[]",
    "\"jsonrpc\"",
    "\"params\"",
    "\"result\"",
    "\"error\"",
    "9223372036854775808",
    "-0",
    "1.5",
    "\\",
];

/// Byte sequences that are not UTF-8.
const BAD_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xfe",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf8\x88\x80\x80\x80",
    b"\x80",
    b"\xf4\x90\x80\x80",
];

fn calm_down(v: &mut [u8], from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i + from.len() <= v.len() {
        if &v[i..i + from.len()] == from {
            v[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
}

pub struct Generator {
    rng: Rng,
    /// Frames generated so far; makes ids unique.
    n: u64,
    max_line: usize,
    /// Recently used id texts, to send duplicates (legal).
    recent: Vec<String>,
    /// Frames left in a calm stretch: no cancel or interrupt is generated, so turns live long
    /// enough for the answers to kiwi's requests to arrive (the writer runs a pipe's worth of
    /// frames ahead of kiwi, and a cancel would almost always come first).
    calm: u32,
}

impl Generator {
    pub fn new(seed: u64, max_line: usize) -> Self {
        Generator { rng: Rng::new(seed), n: 0, max_line, recent: Vec::new(), calm: 0 }
    }

    /// One chunk to write: one or more lines, always ending with `\n`.
    pub fn frame(&mut self) -> Vec<u8> {
        self.n += 1;
        if self.calm > 0 {
            self.calm -= 1;
        } else if self.rng.per_mille(2) {
            self.calm = self.rng.range(100, 600) as u32;
        }
        let mut out = match self.rng.below(1000) {
            0..=219 => self.valid_request().into_bytes(),
            220..=279 if self.calm > 0 => self.valid_request().into_bytes(),
            220..=279 => self.burst().into_bytes(),
            280..=349 => self.odd_id_request().into_bytes(),
            350..=379 => self.invalid_id_request().into_bytes(),
            380..=429 => self.unknown_method().into_bytes(),
            430..=469 => self.notification().into_bytes(),
            470..=519 => self.stray_response().into_bytes(),
            520..=559 => self.invalid_shape().into_bytes(),
            560..=659 => self.broken_json(),
            660..=799 => self.mutated(),
            800..=839 => self.bad_utf8(),
            840..=869 => self.lone_surrogates().into_bytes(),
            870..=894 => self.huge().into_bytes(),
            895..=929 => self.deep().into_bytes(),
            930..=933 => self.boundary_line(),
            _ => self.padded(),
        };
        if out.last() != Some(&b'\n') {
            out.push(b'\n');
        }
        if self.calm > 0 {
            // Many categories carry a cancel; in a calm stretch it becomes an unknown method
            // of the same length (still answered, -32601).
            calm_down(&mut out, b"\"cancel\"", b"\"cancal\"");
            calm_down(&mut out, b"\"interrupt\"", b"\"interrupx\"");
        }
        out
    }

    // ---- ids ----

    /// The JSON text of an id kiwi accepts (a string or an i64).
    fn fresh_id(&mut self) -> String {
        let n = self.n as i64;
        let text = match self.rng.below(100) {
            0..=59 => json_str(&format!("f{n}")),
            60..=67 => n.to_string(),
            68..=70 => (-n).to_string(),
            71..=72 => (i64::MAX - n).to_string(),
            73..=74 => (i64::MIN + n).to_string(),
            75..=80 => json_str(&format!("ü{n}😀\u{2028}\u{0}\u{202e}\t\"\\")),
            81..=82 => format!("\"\\u00fc{n}\\ud83d\\ude00\\/\""),
            // A lone surrogate becomes U+FFFD: the answer carries the replaced id.
            83..=84 => format!("\"s{n}\\ud800\""),
            85..=86 => json_str(&format!("{}{n}", "L".repeat(self.rng.range(100, 4000)))),
            87..=88 => "\"\"".into(),
            89..=90 => "0".into(),
            _ => match self.recent.is_empty() {
                true => json_str(&format!("f{n}")),
                false => self.rng.pick(&self.recent).clone(),
            },
        };
        if self.recent.len() < 64 {
            self.recent.push(text.clone());
        } else {
            let slot = self.rng.below(64) as usize;
            self.recent[slot] = text.clone();
        }
        text
    }

    fn plain_id(&mut self, prefix: &str) -> String {
        json_str(&format!("{prefix}{}", self.n))
    }

    // ---- request text ----

    /// A request line with optional members in varying order and spacing.
    fn request_text(&mut self, id: Option<&str>, method: &str, params: Option<String>) -> String {
        let mut fields: Vec<String> = Vec::with_capacity(5);
        // `jsonrpc` may be absent (accepted); wrong values are `invalid_shape`'s business.
        if !self.rng.per_mille(50) {
            fields.push("\"jsonrpc\":\"2.0\"".into());
        }
        if let Some(id) = id {
            fields.push(format!("\"id\":{id}"));
        }
        fields.push(format!("\"method\":{}", json_str(method)));
        if let Some(p) = params {
            fields.push(format!("\"params\":{p}"));
        }
        if self.rng.per_mille(40) {
            fields.push("\"extra\":{\"x\":[1,2,null],\"y\":\"z\"}".into());
        }
        if self.rng.per_mille(100) {
            for i in (1..fields.len()).rev() {
                let j = self.rng.below(i as u64 + 1) as usize;
                fields.swap(i, j);
            }
        }
        let sep = if self.rng.per_mille(100) { " , " } else { "," };
        let body = fields.join(sep);
        if self.rng.per_mille(50) { format!("{{ {body} }}") } else { format!("{{{body}}}") }
    }

    fn valid_request(&mut self) -> String {
        let id = self.fresh_id();
        self.known_request(&id)
    }

    fn known_request(&mut self, id: &str) -> String {
        let (method, params) = match self.rng.below(100) {
            0..=44 => ("prompt", Some(self.prompt_params())),
            45..=72 if self.calm > 0 => ("prompt", Some(self.prompt_params())),
            45..=64 => ("cancel", self.loose_params()),
            65..=72 => ("interrupt", self.loose_params()),
            73..=86 => ("run", Some(self.run_params())),
            _ => ("initialize", Some(self.initialize_params())),
        };
        self.request_text(Some(id), method, params)
    }

    /// Params that `cancel` and `interrupt` ignore.
    fn loose_params(&mut self) -> Option<String> {
        match self.rng.below(6) {
            0 => None,
            1 => Some("null".into()),
            2 => Some("{}".into()),
            3 => Some("[1]".into()),
            4 => Some("{\"x\":1}".into()),
            _ => Some("\"s\"".into()),
        }
    }

    fn prompt_params(&mut self) -> String {
        let input = match self.rng.below(100) {
            0..=69 => Value::String(self.script()),
            70..=79 => {
                let script = self.script();
                let parts: Vec<Value> =
                    script.split('\n').map(|l| json!({"type":"text","text":format!("{l}\n")})).collect();
                Value::Array(parts)
            }
            80..=84 => json!([
                {"type":"text","text":"text: with media"},
                {"type":"think","think":"hmm"},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}
            ]),
            85..=94 => return self.invalid_prompt_params(),
            95..=96 => json!(""),
            _ => json!([]),
        };
        json!({ "user_input": input }).to_string()
    }

    /// -32602 material (and one odd but valid shape).
    fn invalid_prompt_params(&mut self) -> String {
        (*self.rng.pick(&[
            "{}",
            "{\"user_input\":7}",
            "{\"user_input\":null}",
            "{\"user_input\":{\"text\":\"x\"}}",
            "{\"user_input\":[{\"type\":\"bogus\"}]}",
            "{\"user_input\":[{\"type\":\"text\"}]}",
            "{\"user_input\":[5]}",
            "{\"user_input\":[{\"type\":\"image_url\",\"image_url\":{}}]}",
            "[\"text: hi\"]",
            "\"text: hi\"",
            "null",
            "{\"userInput\":\"text: hi\"}",
            "{\"user_input\":\"text: ok\",\"user_input\":5}",
        ]))
        .to_string()
    }

    fn run_params(&mut self) -> String {
        let script = self.script();
        match self.rng.below(6) {
            0..=2 => json!({ "input": script }).to_string(),
            3 => json!({ "prompt": script }).to_string(),
            4 => "{\"input\":5}".into(),
            _ => "{}".into(),
        }
    }

    fn initialize_params(&mut self) -> String {
        let mut p = json!({"protocol_version": *self.rng.pick(&["1.2", "1.1", "9.9", ""])});
        if self.rng.per_mille(500) {
            p["client"] =
                json!({"name": "fuzz", "version": if self.rng.per_mille(500) { json!("1") } else { json!(null) }});
        }
        if self.rng.per_mille(600) {
            let count = self.rng.range(0, 8);
            let tools: Vec<Value> = (0..count)
                .map(|_| {
                    let name = *self.rng.pick(&["ext_a", "ext_b", "ext_a", "Shell", "ReadFile", "ünï", ""]);
                    let parameters = match self.rng.below(8) {
                        0 => json!({"type": "nope"}),
                        1 => json!(5),
                        2 => json!({"$ref": "http://127.0.0.1:9/s.json"}),
                        _ => json!({"type":"object","properties":{"a":{"type":"integer"}}}),
                    };
                    json!({"name": name, "description": "d", "parameters": parameters})
                })
                .collect();
            p["external_tools"] = Value::Array(tools);
        }
        match self.rng.below(20) {
            0 => "{}".into(),
            1 => "{\"protocol_version\":5}".into(),
            2 => "{\"protocol_version\":\"1.2\",\"external_tools\":[{\"name\":\"x\"}]}".into(),
            _ => p.to_string(),
        }
    }

    // ---- `_echo` scripts (the user input is the model's reply) ----

    fn tool_call(&mut self, id: &str, name: &str, arguments: Value) -> String {
        format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments}))
    }

    fn script(&mut self) -> String {
        if self.rng.per_mille(40) {
            let cmd = *self.rng.pick(&[
                "/clear",
                "/reset",
                "/yolo",
                "/compact",
                "/compact focus",
                "/foo bar",
                "/skill:none",
                "/flow:none",
                "/init",
            ]);
            // `/init` runs a nested agent turn: keep it rare.
            if cmd != "/init" || self.rng.per_mille(100) {
                return cmd.into();
            }
        }
        let n = self.n;
        let lines = self.rng.range(1, 6);
        let mut out: Vec<String> = Vec::with_capacity(lines + 1);
        // Model-chosen tool-call ids may repeat within a step; two external
        // calls sharing one are the case that once failed one of them as "wire closed".
        let shared_id = self.rng.per_mille(100);
        if shared_id && self.rng.per_mille(500) {
            let calls: Vec<String> = (0..self.rng.range(2, 4))
                .map(|_| {
                    let name = *self.rng.pick(&["ext_a", "ext_b"]);
                    self.tool_call(&format!("dup-{n}"), name, json!("{\"a\":1}"))
                })
                .collect();
            return format!("text: ok\n{}", calls.join("\n"));
        }
        for j in 0..lines {
            let tc = if shared_id { format!("dup-{n}") } else { format!("tc-{n}-{j}") };
            let line = match self.rng.below(100) {
                0..=29 => format!("text: {}", self.words()),
                30..=34 => format!("think: {}", self.words()),
                35..=38 => format!("id: m-{n}"),
                39..=42 => "usage: input_other=3 output=2 input_cache_read=1".into(),
                43..=54 => {
                    let cmd = *self.rng.pick(SHELL_COMMANDS);
                    let args = json!({ "command": cmd }).to_string();
                    self.tool_call(&tc, "Shell", json!(args))
                }
                55..=62 => {
                    let args = json!({"todos":[{"title":"a","status":"pending"},{"title":"b","status":"done"}]});
                    self.tool_call(&tc, "SetTodoList", json!(args.to_string()))
                }
                63..=67 => {
                    let (name, args) = *self.rng.pick(&[
                        ("ReadFile", "{\"path\":\"missing.txt\"}"),
                        ("ReadFile", "{\"path\":\"fuzz.txt\"}"),
                        ("Glob", "{\"pattern\":\"*\"}"),
                        ("Grep", "{\"pattern\":\"x\"}"),
                    ]);
                    self.tool_call(&tc, name, json!(args))
                }
                68..=70 => self.tool_call(&tc, "WriteFile", json!("{\"path\":\"fuzz.txt\",\"content\":\"fuzz\\n\"}")),
                71..=72 => self.tool_call(&tc, "Nope", json!("{}")),
                73..=80 => {
                    let name = *self.rng.pick(&["ext_a", "ext_b"]);
                    self.tool_call(&tc, name, json!("{\"a\":1}"))
                }
                81..=84 => {
                    let args = *self.rng.pick(&["{not json", "[1,2]", "{\"command\":5}"]);
                    let args = if self.rng.per_mille(300) { Value::Null } else { json!(args) };
                    self.tool_call(&tc, "Shell", args)
                }
                85..=88 => format!("tool_call_part: {}", json!({"arguments_part": "{}"})),
                89..=91 => (*self.rng.pick(&["# comment", "```", "echo", ""])).to_string(),
                92..=94 => "bad line without colon".into(),
                95..=96 => "bogus: x".into(),
                _ => "error: 401 Token expired".into(),
            };
            out.push(line);
        }
        // A text part first, most of the time, so the reply is never empty (an empty reply
        // is retried with a backoff of a second, which would only slow the run down).
        if self.rng.per_mille(900) {
            out.insert(0, "text: ok".into());
        }
        let sep = match self.rng.below(20) {
            0 => "\r\n",
            1 => "\u{2028}",
            _ => "\n",
        };
        out.join(sep)
    }

    fn words(&mut self) -> String {
        let count = self.rng.range(1, 6);
        let mut s = String::new();
        for i in 0..count {
            if i > 0 {
                s.push(' ');
            }
            let word = self.rng.pick::<&str>(&["hello", "ünï", "😀", "\"q\"", "'q'", "a\tb", "\\n", "{}", "[x]", "::"]);
            s.push_str(word);
        }
        s
    }

    // ---- categories ----

    /// Prompts, cancels and interrupts in one write, so they race inside kiwi.
    fn burst(&mut self) -> String {
        let mut lines = Vec::new();
        let id = self.plain_id("bp");
        let p = Some(self.prompt_params());
        lines.push(self.request_text(Some(&id), "prompt", p));
        for k in 0..self.rng.range(1, 6) {
            let id = json_str(&format!("b{}-{k}", self.n));
            let line = match self.rng.below(6) {
                0 | 1 => self.request_text(Some(&id), "cancel", None),
                2 => self.request_text(None, "interrupt", None),
                3 => self.request_text(Some(&id), "interrupt", None),
                4 => {
                    let p = Some(self.prompt_params());
                    self.request_text(Some(&id), "prompt", p)
                }
                _ => {
                    let p = Some(self.initialize_params());
                    self.request_text(Some(&id), "initialize", p)
                }
            };
            lines.push(line);
        }
        lines.join("\n")
    }

    fn odd_id_request(&mut self) -> String {
        let id = self.fresh_id();
        let methods: &[&str] =
            if self.calm > 0 { &["prompt", "nope"] } else { &["cancel", "interrupt", "prompt", "nope"] };
        let method = *self.rng.pick(methods);
        let params = if method == "prompt" { Some(self.prompt_params()) } else { None };
        self.request_text(Some(&id), method, params)
    }

    /// Ids kiwi cannot echo: -32600 with id null (or a parse error).
    fn invalid_id_request(&mut self) -> String {
        let id = *self.rng.pick(&[
            "1.5",
            "1.0",
            "1e3",
            "-0.0",
            "18446744073709551615",
            "18446744073709551616",
            "9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "1e400",
            "true",
            "false",
            "{\"a\":1}",
            "[1]",
            "[]",
            "{}",
            "-0",
        ]);
        let method = *self.rng.pick(&["cancel", "prompt", "nope", "initialize"]);
        let params = if method == "prompt" { Some("{\"user_input\":\"text: x\"}".to_string()) } else { None };
        self.request_text(Some(id), method, params)
    }

    fn unknown_method(&mut self) -> String {
        let id = self.fresh_id();
        let method = match self.rng.below(12) {
            0 => "event".to_string(),
            1 => "request".into(),
            2 => "replay".into(),
            3 => "steer".into(),
            4 => "set_plan_mode".into(),
            5 => "Prompt".into(),
            6 => "".into(),
            7 => "prompt ".into(),
            8 => "ünï😀\u{0}".into(),
            9 => "m".repeat(self.rng.range(100, 3000)),
            10 => "rpc.discover".into(),
            _ => format!("nope{}", self.n),
        };
        let params = if self.rng.per_mille(500) { Some(self.prompt_params()) } else { None };
        self.request_text(Some(&id), &method, params)
    }

    /// No id: no answer (an `interrupt` notification still cancels a running turn).
    fn notification(&mut self) -> String {
        let method =
            *self.rng.pick(&["cancel", "interrupt", "interrupt", "prompt", "initialize", "run", "nope", "event"]);
        let params = match method {
            "prompt" | "run" => Some(self.prompt_params()),
            _ => self.loose_params(),
        };
        let line = self.request_text(None, method, params);
        if self.rng.per_mille(300) { line.replacen('{', "{\"id\":null,", 1) } else { line }
    }

    /// Responses to ids kiwi never asked: silently ignored, unless the shape is invalid.
    fn stray_response(&mut self) -> String {
        let id = match self.rng.below(4) {
            0 => self.plain_id("r"),
            1 => (self.n as i64).to_string(),
            2 => "\"\"".into(),
            _ => json_str("7c72e314-0000-4000-8000-000000000000"),
        };
        let body = match self.rng.below(12) {
            0 => "\"result\":null".to_string(),
            1 => "\"result\":{\"request_id\":\"x\",\"response\":\"approve\"}".into(),
            2 => "\"result\":{\"tool_call_id\":\"t\",\"return_value\":{\"is_error\":false,\"output\":\"\",\"message\":\"\",\"display\":[]}}".into(),
            3 => "\"error\":{\"code\":-1,\"message\":\"no\"}".into(),
            4 => "\"error\":{\"code\":-1,\"message\":\"no\",\"data\":[1]}".into(),
            // Invalid error objects: -32600.
            5 => "\"error\":{\"code\":\"bad\"}".into(),
            6 => "\"error\":{\"code\":1.5,\"message\":\"m\"}".into(),
            7 => "\"error\":5".into(),
            // Neither result nor error: ignored, or "Invalid response" when method is null.
            8 => "\"x\":1".into(),
            9 => "\"method\":null".into(),
            10 => "\"result\":1,\"error\":{\"code\":2,\"message\":\"both\"}".into(),
            _ => "\"error\":null,\"result\":[]".into(),
        };
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},{body}}}")
    }

    fn invalid_shape(&mut self) -> String {
        let id = self.plain_id("v");
        match self.rng.below(14) {
            0 => "[1,2]".into(),
            1 => "\"str\"".into(),
            2 => "42".into(),
            3 => "null".into(),
            4 => "true".into(),
            5 => format!("{{\"jsonrpc\":\"2.1\",\"id\":{id},\"method\":\"cancel\"}}"),
            6 => format!("{{\"jsonrpc\":null,\"id\":{id},\"method\":\"cancel\"}}"),
            7 => format!("{{\"jsonrpc\":2.0,\"id\":{id},\"method\":\"cancel\"}}"),
            8 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":5}}"),
            9 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":[\"prompt\"]}}"),
            10 => format!("[{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"cancel\"}}]"),
            11 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"cancel\",\"error\":{{\"code\":\"x\"}}}}"),
            12 => "[]".into(),
            _ => "{\"jsonrpc\":\"2.0\",\"method\":{\"name\":\"prompt\"}}".into(),
        }
    }

    fn broken_json(&mut self) -> Vec<u8> {
        match self.rng.below(16) {
            0 => {
                let full = self.valid_request();
                let cut = self.rng.range(0, full.len().max(1));
                full.as_bytes()[..cut].to_vec()
            }
            1 => {
                let len = self.rng.range(1, 200);
                (0..len).map(|_| self.rng.below(256) as u8).map(|b| if b == b'\n' { b'x' } else { b }).collect()
            }
            2 => {
                let len = self.rng.range(1, 40);
                let mut s = String::new();
                for _ in 0..len {
                    let token = self.rng.pick::<&str>(TOKENS);
                    s.push_str(token);
                }
                s.into_bytes()
            }
            3 => Vec::new(),
            4 => b" \t ".to_vec(),
            5 => {
                let mut v = b"\xef\xbb\xbf".to_vec();
                v.extend(self.valid_request().into_bytes());
                v
            }
            6 => {
                let mut v = self.valid_request().into_bytes();
                let tails: [&[u8]; 4] = [b"x", b"}", b",", b"{\"id\":\"x\",\"method\":\"cancel\"}"];
                let tail = *self.rng.pick(&tails);
                v.extend_from_slice(tail);
                v
            }
            7 => b"{not-json}".to_vec(),
            8 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"cancel", self.plain_id("u")).into_bytes(),
            9 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"cancel\",\"params\":NaN}}", self.plain_id("u"))
                .into_bytes(),
            10 => b"{'id':'a','method':'cancel'}".to_vec(),
            11 => format!("{{\"id\":{}/*c*/,\"method\":\"cancel\"}}", self.plain_id("u")).into_bytes(),
            12 => format!("{{\"id\":{},\"method\":\"cancel\",}}", self.plain_id("u")).into_bytes(),
            13 => b"\0".to_vec(),
            14 => format!("{{\"id\":{},\"method\":\"cancel\",\"params\":\"\\ud80\"}}", self.plain_id("u")).into_bytes(),
            _ => {
                let mut v = b"{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"cancel\"".to_vec();
                v.push(0x0c);
                v
            }
        }
    }

    /// A valid frame with a few random byte-level edits: what it becomes is up to the oracle.
    fn mutated(&mut self) -> Vec<u8> {
        let base = match self.rng.below(4) {
            0 => self.stray_response(),
            1 => self.burst(),
            _ => self.valid_request(),
        };
        let mut v = base.into_bytes();
        for _ in 0..self.rng.range(1, 5) {
            if v.is_empty() {
                break;
            }
            let at = self.rng.range(0, v.len());
            match self.rng.below(7) {
                0 => v[at] = self.rng.below(256) as u8,
                1 => v[at] ^= 1 << self.rng.below(8),
                2 => v.insert(at, self.rng.below(128) as u8),
                3 => {
                    let end = (at + self.rng.range(1, 16)).min(v.len());
                    v.drain(at..end);
                }
                4 => {
                    let end = (at + self.rng.range(1, 32)).min(v.len());
                    let piece = v[at..end].to_vec();
                    v.splice(at..at, piece);
                }
                5 => {
                    let token = self.rng.pick(TOKENS).as_bytes().to_vec();
                    v.splice(at..at, token);
                }
                _ => {
                    let bad = self.rng.pick(BAD_UTF8).to_vec();
                    v.splice(at..at, bad);
                }
            }
        }
        v
    }

    /// Invalid UTF-8 inside strings of otherwise valid requests: replaced, not fatal.
    fn bad_utf8(&mut self) -> Vec<u8> {
        let bad = self.rng.pick(BAD_UTF8).to_vec();
        let n = self.n;
        let (head, tail) = match self.rng.below(5) {
            0 => (format!("{{\"jsonrpc\":\"2.0\",\"id\":\"u{n}"), "\",\"method\":\"cancel\"}".to_string()),
            1 => (format!("{{\"jsonrpc\":\"2.0\",\"id\":\"u{n}\",\"method\":\"can"), "cel\"}".to_string()),
            2 => (
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":\"u{n}\",\"method\":\"prompt\",\"params\":{{\"user_input\":\"text: a"
                ),
                "b\"}}".to_string(),
            ),
            3 => (format!("{{\"jsonrpc\":\"2.0\",\"id\":\"u{n}\",\"method\":\"cancel\",\"x\":1}}"), String::new()),
            _ => (String::new(), format!("{{\"jsonrpc\":\"2.0\",\"id\":\"u{n}\",\"method\":\"cancel\"}}")),
        };
        let mut v = head.into_bytes();
        v.extend(bad);
        v.extend(tail.into_bytes());
        v
    }

    /// Lone UTF-16 surrogate escapes in keys, values, ids and methods.
    fn lone_surrogates(&mut self) -> String {
        let n = self.n;
        let esc = *self.rng.pick(&[
            "\\ud800",
            "\\udfff",
            "\\udc00\\ud800",
            "\\ud83d\\ude00",
            "\\\\ud800",
            "\\ud800\\ud800",
            "\\udbff",
            "\\ud800\\u0041",
        ]);
        match self.rng.below(5) {
            0 => format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"ls{n}\",\"method\":\"prompt\",\"params\":{{\"user_input\":\"text: a{esc}b\"}}}}"
            ),
            1 => format!("{{\"jsonrpc\":\"2.0\",\"id\":\"ls{n}{esc}\",\"method\":\"cancel\"}}"),
            2 => format!("{{\"jsonrpc\":\"2.0\",\"id\":\"ls{n}\",\"method\":\"cancel\",\"{esc}\":1}}"),
            3 => format!("{{\"jsonrpc\":\"2.0\",\"id\":\"ls{n}\",\"method\":\"can{esc}cel\"}}"),
            _ => format!("{{\"jsonrpc\":\"2.0\",\"id\":\"ls{n}\",\"result\":\"{esc}\"}}"),
        }
    }

    /// Big values that still fit the line limit.
    fn huge(&mut self) -> String {
        // Log-uniform sizes: mostly kilobytes, sometimes close to the limit.
        let room = self.max_line.saturating_sub(256).max(1024);
        let size = (512usize << self.rng.below(8)).min(room);
        let size = self.rng.range(size / 2, size + 1);
        let id = self.plain_id("h");
        match self.rng.below(8) {
            0 => {
                let text = format!("text: {}", "x".repeat(size));
                self.request_text(Some(&id), "prompt", Some(json!({ "user_input": text }).to_string()))
            }
            1 => {
                let items = vec![Value::from(1); size / 2];
                self.request_text(Some(&id), "cancel", Some(json!({ "a": items }).to_string()))
            }
            2 => {
                let mut obj = serde_json::Map::new();
                for i in 0..size / 12 {
                    obj.insert(format!("k{i}"), Value::from(i));
                }
                self.request_text(Some(&id), "cancel", Some(Value::Object(obj).to_string()))
            }
            3 => {
                let long_id = json_str(&format!("{}{}", "i".repeat(size), self.n));
                self.request_text(Some(&long_id), "cancel", None)
            }
            4 => self.request_text(Some(&id), &"m".repeat(size), None),
            // Numbers no f64 holds: a parse error for the whole line.
            5 => {
                let digits = "9".repeat(self.rng.range(300, 2000));
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"cancel\",\"params\":{{\"n\":{digits}}}}}")
            }
            6 => {
                let escaped = "\\u00e9\\n\\\"".repeat(size / 14);
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"prompt\",\"params\":{{\"user_input\":\"text: {escaped}\"}}}}"
                )
            }
            _ => {
                let parts: Vec<Value> =
                    (0..size / 40).map(|i| json!({"type":"text","text":format!("text: p{i}\n")})).collect();
                self.request_text(Some(&id), "prompt", Some(json!({ "user_input": parts }).to_string()))
            }
        }
    }

    /// Nesting around (and far past) any parser's depth limit.
    fn deep(&mut self) -> String {
        let depth = *self.rng.pick(&[10usize, 50, 100, 120, 127, 128, 129, 200, 1000, 5000, 20_000]);
        let id = self.plain_id("d");
        let (open, close) = if self.rng.per_mille(500) {
            ("[".repeat(depth), "]".repeat(depth))
        } else {
            ("{\"a\":".repeat(depth), "}".repeat(depth))
        };
        match self.rng.below(4) {
            0 => format!("{open}1{close}"),
            1 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"cancel\",\"params\":{open}1{close}}}"),
            2 => format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"prompt\",\"params\":{{\"user_input\":\"text: d\",\"x\":{open}1{close}}}}}"
            ),
            _ => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{open}1{close}}}"),
        }
    }

    /// Lines right at, just past and far past `--max-line-bytes`.
    fn boundary_line(&mut self) -> Vec<u8> {
        let max = self.max_line;
        // Mostly at the boundary; the few big ones show that skipping costs no memory.
        let target = match self.rng.below(400) {
            0..=89 => max - 1,
            90..=179 => max,
            180..=269 => max + 1,
            270..=319 => max + 2,
            320..=389 => max * 2,
            390..=398 => max * 8,
            _ => 4 * 1024 * 1024,
        };
        let id = self.plain_id("L");
        if self.rng.per_mille(200) {
            return vec![b'z'; target];
        }
        let (method, key) = if self.rng.per_mille(500) { ("prompt", "user_input") } else { ("cancel", "pad") };
        let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{{\"{key}\":\"text: ");
        let tail = "\"}}";
        let pad = target.saturating_sub(head.len() + tail.len());
        let mut v = Vec::with_capacity(target + 1);
        v.extend_from_slice(head.as_bytes());
        v.resize(head.len() + pad, b'a');
        v.extend_from_slice(tail.as_bytes());
        v
    }

    /// Valid requests with CRLF, whitespace kiwi must strip, and characters it must not.
    fn padded(&mut self) -> Vec<u8> {
        let line = self.valid_request().into_bytes();
        let (head, tail): (&[u8], &[u8]) = *self.rng.pick(&[
            (&b""[..], &b"\r"[..]),
            (b"   \t", b"  "),
            (b"\x0b\x0c", b"\x0c"),
            ("\u{a0}\u{2028}\u{3000}".as_bytes(), "\u{2029}".as_bytes()),
            ("\u{85}".as_bytes(), b""),
            (b"\x1c", b""),
            (b"", b"\x1f"),
            (b"\r", b"\r\r"),
            (b"\0", b""),
        ]);
        let mut v = head.to_vec();
        v.extend(line);
        v.extend_from_slice(tail);
        v
    }
}
