//! Whether a Markdown file's YAML frontmatter has a top-level `hooks` key, read by a YAML
//! parser, refusing what could hide one.

/// Whether a Markdown file's YAML frontmatter has a top-level `hooks` key; `Err` says why that
/// cannot be told. A file that does not start with a `---` line has no frontmatter; one whose
/// frontmatter never closes is read to its end (a reader that takes it whole must not find
/// more than this one). The frontmatter is read by a YAML parser (yaml-rust2); one that uses an
/// alias is refused before it is loaded, since the loader copies what an alias names and a
/// few lines of them grow without bound.
pub fn frontmatter_has_hooks(text: &str) -> Result<bool, String> {
    use yaml_rust2::parser::{Event, EventReceiver, Parser};
    use yaml_rust2::{Yaml, YamlLoader};
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    let opening = loop {
        match lines.next() {
            None => return Ok(false),
            Some(line) if line.trim().is_empty() => continue,
            Some(line) => break line,
        }
    };
    if !opening.starts_with("---") {
        return Ok(false);
    }
    if opening.trim_end() != "---" {
        return Err(format!("its first line is `{}`, not `---`", clip(opening)));
    }
    let yaml: Vec<&str> = lines.take_while(|line| line.trim_end() != "---").collect();
    let yaml = yaml.join("\n");

    struct Aliases(bool);
    impl EventReceiver for Aliases {
        fn on_event(&mut self, event: Event) {
            self.0 |= matches!(event, Event::Alias(_));
        }
    }
    let mut aliases = Aliases(false);
    Parser::new_from_str(&yaml)
        .load(&mut aliases, true)
        .map_err(|e| e.to_string())?;
    if aliases.0 {
        return Err("it uses an alias (*), which can stand for hooks".to_string());
    }
    let docs = YamlLoader::load_from_str(&yaml).map_err(|e| e.to_string())?;
    if docs.len() > 1 {
        return Err("it holds more than one YAML document".to_string());
    }
    let hooks = Yaml::String("hooks".to_string());
    Ok(docs
        .first()
        .is_some_and(|doc| matches!(doc, Yaml::Hash(map) if map.contains_key(&hooks))))
}

/// A line, cut to fit in a message.
fn clip(line: &str) -> String {
    let cut: String = line.chars().take(40).collect();
    if cut.len() < line.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(text: &str) -> Result<bool, String> {
        frontmatter_has_hooks(text)
    }

    #[test]
    fn a_top_level_hooks_key_is_found_in_every_spelling() {
        for text in [
            "---\nname: x\nhooks:\n  Stop: []\n---\nbody\n",
            "---\r\nhooks: {}\r\n---\r\n",
            "\u{feff}---\nhooks:\n---\n",
            "---\n\"hooks\": 1\n---\n",
            "---\n'hooks' : 1\n---\n",
            "---\nhooks   : 1\n---\n",
            "---\nhooks: 1\n",
            "\n\n---\nhooks: 1\n---\n",
        ] {
            assert_eq!(hooks(text), Ok(true), "{text:?}");
        }
    }

    #[test]
    fn nested_or_absent_hooks_are_not_top_level() {
        for text in [
            "no frontmatter\nhooks: 1\n",
            "---\nname: x\n---\nhooks: 1\n",
            "---\nname: x\nmeta:\n  hooks: 1\n---\n",
            "---\ndescription: |\n  hooks: 1\n---\n",
            "---\nhooksy: 1\n# hooks: 1\n---\n",
            "---\nurl: http://x\n---\n",
        ] {
            assert_eq!(hooks(text), Ok(false), "{text:?}");
        }
    }

    #[test]
    fn what_could_hide_a_key_is_refused() {
        for text in [
            // An alias stands for what its anchor holds, and loading it copies that.
            "---\nbase: &a {hooks: 1}\nother: *a\n---\n",
            "---\nname: [unclosed\n---\n",
            "---\na: b: c\n---\n",
            "---yaml\nhooks: 1\n---\n",
            "---\nname: x\n...\nhooks: 1\n---\n",
        ] {
            assert!(hooks(text).is_err(), "{text:?}: {:?}", hooks(text));
        }
        // What a parser reads as a top-level hooks key, however it is written.
        for text in [
            "---\n{hooks: 1}\n---\n",
            "---\n? hooks\n: 1\n---\n",
            "---\n!!str hooks: 1\n---\n",
            "---\n\"ho\\x6fks\": 1\n---\n",
        ] {
            assert_eq!(hooks(text), Ok(true), "{text:?}");
        }
    }
}
