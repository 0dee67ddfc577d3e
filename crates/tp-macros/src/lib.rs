//! The only proc-macro of `tp`: identifier pasting for `trace_event!`.
//!
//! `macro_rules!` can't build `trace_NAME` / `register_trace_NAME` from `NAME`, so
//! `trace_event!` wraps its expansion in [`paste!`], which replaces every bracketed group
//! `[< a b c >]` with one identifier made of its parts (identifiers, literals and `_`), keeping
//! the span of the last identifier part so errors point at the user's `NAME`.
//! Everything else passes through unchanged. No dependencies, no parsing beyond that.

use proc_macro::{Delimiter, Group, Ident, Span, TokenStream, TokenTree};

/// Paste `[< part part ... >]` groups into single identifiers. Internal to `tp`.
#[proc_macro]
pub fn paste(input: TokenStream) -> TokenStream {
    expand(input)
}

fn expand(input: TokenStream) -> TokenStream {
    let mut out = Vec::new();
    for tt in input {
        match tt {
            TokenTree::Group(g) => {
                if g.delimiter() == Delimiter::Bracket {
                    if let Some(id) = try_paste(g.stream()) {
                        out.push(TokenTree::Ident(id));
                        continue;
                    }
                }
                let mut ng = Group::new(g.delimiter(), expand(g.stream()));
                ng.set_span(g.span());
                out.push(TokenTree::Group(ng));
            }
            other => out.push(other),
        }
    }
    out.into_iter().collect()
}

/// `< a b c >` -> `abc`, or `None` when the group is not a paste group.
fn try_paste(stream: TokenStream) -> Option<Ident> {
    let tts: Vec<TokenTree> = stream.into_iter().collect();
    let (first, last) = (tts.first()?, tts.last()?);
    let is_punct = |t: &TokenTree, c: char| matches!(t, TokenTree::Punct(p) if p.as_char() == c);
    if tts.len() < 3 || !is_punct(first, '<') || !is_punct(last, '>') {
        return None;
    }
    let mut name = String::new();
    let mut span = Span::call_site();
    for t in &tts[1..tts.len() - 1] {
        match t {
            TokenTree::Ident(i) => {
                let s = i.to_string();
                name.push_str(s.strip_prefix("r#").unwrap_or(&s));
                span = i.span();
            }
            TokenTree::Literal(l) => name.push_str(l.to_string().trim_matches('"')),
            TokenTree::Punct(p) if p.as_char() == '_' => name.push('_'),
            // `$name` from macro_rules arrives as an invisible group around the ident.
            TokenTree::Group(g) if g.delimiter() == Delimiter::None => {
                for inner in g.stream() {
                    if let TokenTree::Ident(i) = inner {
                        name.push_str(&i.to_string());
                        span = i.span();
                    } else {
                        return None;
                    }
                }
            }
            _ => return None,
        }
    }
    Some(Ident::new(&name, span))
}
