//! A tokenizer and a recursive-descent parser that builds a boxed AST for arithmetic
//! expressions, then evaluates it. The AST constructors are annotated with `#[specialize]`.
//!
//! ```text
//! cargo run --release --example expr_parser [iterations]
//! cargo run --release --example expr_parser --features no-size-specialized   # the A/B
//! cargo run --release --example expr_parser --features compare-mimalloc     # against mimalloc
//! ```

#[path = "common/args.rs"]
mod args;

use std::time::Instant;

use specalloc::specialize;

#[cfg(not(feature = "compare-mimalloc"))]
specalloc::install!(static GLOBAL);

#[cfg(feature = "compare-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Which configuration this binary was built in.
fn config() -> &'static str {
    if cfg!(feature = "compare-mimalloc") {
        "mimalloc as the global allocator"
    } else if specalloc::spec::SIZE_SPECIALIZED {
        "specalloc, size-specialised"
    } else {
        "specalloc, opt-out: generic path"
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(i64),
    Op(char),
    Open,
    Close,
}

#[derive(Debug)]
enum Expr {
    Num(i64),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
}

fn tokenize(src: &str) -> Vec<Token> {
    let mut out = Vec::with_capacity(src.len() / 2);
    let mut chars = src.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ' ' => {
                chars.next();
            }
            '0'..='9' => {
                let mut n = 0i64;
                while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                    n = n * 10 + d as i64;
                    chars.next();
                }
                out.push(Token::Num(n));
            }
            '(' => {
                chars.next();
                out.push(Token::Open);
            }
            ')' => {
                chars.next();
                out.push(Token::Close);
            }
            _ => {
                chars.next();
                out.push(Token::Op(c));
            }
        }
    }
    out
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
}

#[specialize]
impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    /// expr := term (('+' | '-') term)*
    fn expr(&mut self) -> Box<Expr> {
        let mut lhs = self.term();
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.next();
            let rhs = self.term();
            lhs = Box::new(Expr::Bin(op, lhs, rhs));
        }
        lhs
    }

    /// term := factor (('*' | '/' | '%') factor)*
    fn term(&mut self) -> Box<Expr> {
        let mut lhs = self.factor();
        while let Some(Token::Op(op @ ('*' | '/' | '%'))) = self.peek().cloned() {
            self.next();
            let rhs = self.factor();
            lhs = Box::new(Expr::Bin(op, lhs, rhs));
        }
        lhs
    }

    /// factor := number | '-' factor | '(' expr ')'
    fn factor(&mut self) -> Box<Expr> {
        match self.next() {
            Some(Token::Num(n)) => Box::new(Expr::Num(n)),
            Some(Token::Op('-')) => Box::new(Expr::Neg(self.factor())),
            Some(Token::Open) => {
                let e = self.expr();
                assert_eq!(self.next(), Some(Token::Close), "expected ')'");
                e
            }
            t => panic!("unexpected token {t:?}"),
        }
    }
}

fn eval(e: &Expr) -> i64 {
    match e {
        Expr::Num(n) => *n,
        Expr::Neg(x) => -eval(x),
        Expr::Bin(op, a, b) => {
            let (a, b) = (eval(a), eval(b));
            match op {
                '+' => a.wrapping_add(b),
                '-' => a.wrapping_sub(b),
                '*' => a.wrapping_mul(b),
                '/' => {
                    if b == 0 {
                        0
                    } else {
                        a / b
                    }
                }
                _ => {
                    if b == 0 {
                        0
                    } else {
                        a % b
                    }
                }
            }
        }
    }
}

/// A deterministic expression of about `terms` numbers.
fn source(seed: u64, terms: usize) -> String {
    let mut s = String::new();
    let mut x = seed;
    let mut depth = 0;
    for i in 0..terms {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x.is_multiple_of(5) {
            s.push('(');
            depth += 1;
        }
        if x.is_multiple_of(7) {
            s.push('-');
        }
        s.push_str(&(x % 1000).to_string());
        if depth > 0 && x.is_multiple_of(3) {
            s.push(')');
            depth -= 1;
        }
        if i + 1 < terms {
            s.push(['+', '-', '*', '/', '%'][(x >> 8) as usize % 5]);
        }
    }
    s.extend(std::iter::repeat_n(')', depth));
    s
}

const USAGE: &str = "usage: expr_parser [iterations]
  iterations  expressions to tokenize, parse and evaluate (default 2000)";

/// The one optional argument (see `common/args.rs`).
fn arg() -> u64 {
    let [n] = args::numbers("expr_parser", USAGE, [2000], |_, _| true);
    n
}

fn main() {
    let iterations = arg();
    let sources: Vec<String> = (0..16).map(|i| source(i * 7919 + 1, 400)).collect();
    let start = Instant::now();
    let mut checksum = 0i64;
    let mut nodes = 0usize;
    for it in 0..iterations {
        let src = &sources[it as usize % sources.len()];
        let tokens = tokenize(src);
        nodes += tokens.len();
        let mut p = Parser {
            tokens: &tokens,
            pos: 0,
        };
        let ast = p.expr();
        checksum = checksum.wrapping_add(eval(&ast));
    }
    let elapsed = start.elapsed();
    println!("{iterations} parses, {nodes} tokens, checksum {checksum}");
    println!("time: {:.3} s ({})", elapsed.as_secs_f64(), config());
    if !cfg!(feature = "compare-mimalloc") {
        println!("{}", specalloc::stats());
    }
}
