// The page of ldr-serve (GET /): a text box, a domain choice and a view comparing every
// domain's translation. It calls only the server's public routes, as any client does
// (GET /domains, GET /languages, POST /translate, POST /detect_domain), with paths relative
// to the page, so that it also works behind a reverse proxy under a prefix.
"use strict";

(function () {
  const AUTO = "auto";
  const $ = (id) => document.getElementById(id);
  const state = {
    domains: [], // The labels of GET /domains, generic included (last).
    classifier: false, // Whether "auto" (the classifier's pick) is offered.
    picker: "classifier", // Who picks in "auto": "classifier", or "guard" (the export's guard).
    glossary: false, // Whether the model applies a glossary (trained with terminology).
    ensembles: [], // Ensemble modes of unlabelled_modes (ens-uniform, ...).
    ignored: null, // Why the model reads no domain label, or null.
    target: null, // The target language code, if known (lang of the translations).
    busy: false,
  };

  // One call of the API: its JSON answer, or an Error with the server's one-line message.
  async function call(path, body) {
    const init = { headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new Error("the server did not answer (" + e.message + ")");
    }
    let value = null;
    try {
      value = await response.json();
    } catch (e) {
      value = null; // Not JSON (a proxy in front, for one).
    }
    if (!response.ok) {
      const message =
        value && typeof value.error === "string"
          ? value.error
          : response.status + " " + response.statusText;
      throw new Error((body === undefined ? "GET " : "POST ") + "/" + path + ": " + message);
    }
    return value;
  }

  function element(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) {
        node.append(typeof child === "string" ? document.createTextNode(child) : child);
      }
    }
    return node;
  }

  function setStatus(text) {
    $("status").textContent = text;
  }

  function showError(text) {
    const error = $("error");
    error.textContent = text;
    error.hidden = !text;
  }

  function percent(probability) {
    return Math.round(probability * 100) + "%";
  }

  // Setup: the domains, the classifier and the language pair of the server.
  async function load() {
    let info;
    try {
      info = await call("domains");
    } catch (e) {
      $("model").textContent = "";
      showError("Cannot read the server's domains: " + e.message);
      return;
    }
    let languages = [];
    try {
      languages = await call("languages");
    } catch (e) {
      languages = []; // Not known: no language pair shown.
    }
    const modes = info.unlabelled_modes || [];
    state.domains = info.domains || [];
    state.ignored = info.labels_ignored;
    state.classifier = modes.includes("classifier");
    state.picker = info.classifier === "guard" ? "guard" : "classifier";
    state.glossary = info.glossary === true;
    $("glossary-field").hidden = !state.glossary;
    state.ensembles = modes.filter((mode) => mode.startsWith("ens-"));
    const source = languages.find((language) => (language.targets || []).length);
    state.target = source ? source.targets[0] : null;

    const select = $("domain");
    select.replaceChildren();
    if (state.classifier) {
      select.append(
        element(
          "option",
          { value: AUTO },
          state.picker === "guard"
            ? "auto: the guard's pick (generic when unsure)"
            : "auto: the classifier's pick"
        )
      );
    }
    for (const domain of state.domains) {
      select.append(element("option", { value: domain }, domain));
    }
    if (state.ensembles.length) {
      const group = element("optgroup", { label: "Ensembles of domain views" });
      for (const mode of state.ensembles) group.append(element("option", { value: mode }, mode));
      select.append(group);
    }
    select.value = state.classifier ? AUTO : "generic";

    const parts = [info.model + " model"];
    if (source) parts.push(source.code + " to " + state.target);
    parts.push("domains: " + state.domains.join(", "));
    parts.push(
      !state.classifier
        ? "no domain classifier"
        : state.picker === "guard"
          ? "with the export's domain guard (generic below " + percent(info.guard_threshold) + ")"
          : "with a domain classifier"
    );
    if ((info.confidence_domains || []).length) parts.push("calibrated confidence");
    let text = parts.join("; ") + ".";
    if (state.ignored) {
      text += " This model reads no domain label: every domain is translated as generic (" +
        state.ignored + ").";
    }
    $("model").textContent = text;
    for (const id of ["domain", "translate", "compare"]) $(id).disabled = false;
  }

  // The glossary typed on the page: {source: target}, or null when empty.
  function glossaryEntries() {
    if (!state.glossary) return null;
    const entries = {};
    const lines = $("glossary").value.split(/\r?\n/);
    lines.forEach((line, i) => {
      if (!line.trim()) return;
      const match = line.match(/^([^=\t]+)[=\t](.+)$/);
      if (!match || !match[1].trim() || !match[2].trim()) {
        throw new Error("Glossary, line " + (i + 1) + ": expected source = target");
      }
      entries[match[1].trim()] = match[2].trim();
    });
    return Object.keys(entries).length ? entries : null;
  }

  // The translation with the glossary's target terms marked.
  function termsNode(translation) {
    const node = element("dd", { class: "translation", dir: "auto", lang: state.target });
    const targets = (translation.terms || []).map((term) => term[1]).filter((t) => t);
    if (!targets.length) {
      node.textContent = translation.text;
      return node;
    }
    const escaped = targets.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const pattern = new RegExp("(" + escaped.join("|") + ")", "gi");
    let last = 0;
    for (const match of translation.text.matchAll(pattern)) {
      node.append(translation.text.slice(last, match.index));
      node.append(element("mark", { class: "term", title: "glossary term" }, match[0]));
      last = match.index + match[0].length;
    }
    node.append(translation.text.slice(last));
    return node;
  }

  function sentences() {
    return $("text")
      .value.split(/\r?\n/)
      .map((line) => line.trim())
      .filter((line) => line.length);
  }

  // The words of each text that are not in every text (as many times), as booleans.
  function differences(texts) {
    const split = texts.map((text) => text.split(/(\s+)/));
    const counts = split.map((tokens) => {
      const count = new Map();
      for (const token of tokens) {
        if (token.trim()) count.set(token, (count.get(token) || 0) + 1);
      }
      return count;
    });
    const shared = new Map();
    for (const [token, count] of counts[0]) {
      shared.set(token, Math.min(count, ...counts.map((other) => other.get(token) || 0)));
    }
    return split.map((tokens) => {
      const seen = new Map();
      return tokens.map((token) => {
        if (!token.trim()) return [token, false];
        seen.set(token, (seen.get(token) || 0) + 1);
        return [token, seen.get(token) > (shared.get(token) || 0)];
      });
    });
  }

  function translationNode(marked) {
    const node = element("dd", { class: "translation", dir: "auto", lang: state.target });
    for (const [token, differs] of marked) {
      node.append(differs ? element("mark", { class: "diff" }, token) : token);
    }
    return node;
  }

  // The translation's calibrated confidence (a model exported with --confidence), or null.
  function confidenceBadge(translation) {
    if (typeof translation.confidence !== "number") return null;
    const low = translation.low_confidence === true;
    return element(
      "span",
      {
        class: "confidence" + (low ? " low" : ""),
        title:
          "The chance, calibrated on this domain's dev set, that this translation is at least" +
          " as good as the domain's median one" + (low ? ": below the threshold chosen on dev" : ""),
      },
      (low ? "low confidence " : "confidence ") + percent(translation.confidence)
    );
  }

  function cell(label, translation, detection, marked) {
    const picked = detection && detection.domain === label;
    const title = element("dt", {}, label);
    if (picked) {
      title.append(
        element(
          "span",
          { class: "badge" },
          state.picker + "'s pick, " + percent(detection.probability)
        )
      );
    }
    const badge = confidenceBadge(translation);
    if (badge) title.append(badge);
    const body = marked ? translationNode(marked) : termsNode(translation);
    const node = element("dl", { class: "cell" + (picked ? " picked" : ""), "data-domain": label });
    node.append(title, body);
    return node;
  }

  function sourceNode(sentence) {
    return element("p", { class: "source", dir: "auto" }, sentence);
  }

  function show(title, nodes, legend) {
    $("results-title").textContent = title;
    $("legend").hidden = !legend;
    $("pick-note").hidden = !state.classifier;
    $("output").replaceChildren(...nodes);
    $("results").hidden = false;
  }

  // One domain (or auto, or an ensemble) for every sentence.
  async function translate(lines) {
    const choice = $("domain").value;
    const body = { sentences: lines };
    const glossary = glossaryEntries();
    if (glossary) body.glossary = glossary;
    if (choice === AUTO) body.unlabelled = "classifier";
    else if (state.ensembles.includes(choice)) body.unlabelled = choice;
    else body.domain = choice;
    const [answer, detections] = await Promise.all([
      call("translate", body),
      choice === AUTO ? call("detect_domain", { q: lines }) : null,
    ]);
    const nodes = lines.map((sentence, i) => {
      const translation = answer.translations[i];
      const detection = detections ? detections[i] : null;
      const node = cell(translation.domain, translation, detection, null);
      node.querySelector("dt").append(
        element("span", { class: "choice" }, "domain chosen: " + translation.domain_choice)
      );
      return element("div", { class: "sentence" }, sourceNode(sentence), node);
    });
    show("Translation", nodes, false);
    const domains = [...new Set(answer.translations.map((t) => t.domain))];
    return (
      "Translated " + lines.length + (lines.length > 1 ? " sentences" : " sentence") +
      " as " + domains.join(", ") + "."
    );
  }

  // Every domain for every sentence, side by side, with the words that differ marked.
  async function compare(lines) {
    const labels = state.domains;
    const glossary = glossaryEntries();
    const [answers, detections] = await Promise.all([
      Promise.all(
        labels.map((domain) =>
          call("translate", Object.assign({ sentences: lines, domain }, glossary ? { glossary } : {}))
        )
      ),
      state.classifier ? call("detect_domain", { q: lines }) : null,
    ]);
    let differing = 0;
    const nodes = lines.map((sentence, i) => {
      const translations = answers.map((answer) => answer.translations[i]);
      const marked = differences(translations.map((t) => t.text));
      if (marked.some((words) => words.some(([, differs]) => differs))) differing += 1;
      const detection = detections ? detections[i] : null;
      const grid = element("div", { class: "grid" });
      labels.forEach((label, k) => grid.append(cell(label, translations[k], detection, marked[k])));
      const children = [sourceNode(sentence)];
      if (detection) {
        children.push(
          element(
            "p",
            { class: "choice classifier" },
            "The " + state.picker + " picks " + detection.domain + " (" +
              percent(detection.probability) + ")."
          )
        );
      }
      children.push(grid);
      return element("div", { class: "sentence" }, ...children);
    });
    show("Every domain compared", nodes, true);
    return (
      "Compared " + labels.length + " domains on " + lines.length +
      (lines.length > 1 ? " sentences" : " sentence") + ": " +
      (differing ? "they differ on " + differing : "every domain agrees") + "."
    );
  }

  async function run(action) {
    if (state.busy || $("translate").disabled) return;
    const lines = sentences();
    if (!lines.length) {
      showError("Type a sentence to translate first.");
      $("text").focus();
      return;
    }
    state.busy = true;
    showError("");
    $("results").setAttribute("aria-busy", "true");
    // aria-disabled, not disabled: a disabled button would lose the keyboard focus.
    for (const id of ["translate", "compare"]) $(id).setAttribute("aria-disabled", "true");
    setStatus(action === compare ? "Translating in every domain…" : "Translating…");
    try {
      setStatus(await action(lines));
    } catch (e) {
      setStatus("");
      showError(e.message);
    } finally {
      state.busy = false;
      $("results").removeAttribute("aria-busy");
      for (const id of ["translate", "compare"]) $(id).removeAttribute("aria-disabled");
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("form").addEventListener("submit", (event) => {
      event.preventDefault();
      run(translate);
    });
    $("compare").addEventListener("click", () => run(compare));
    $("form").addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || event.isComposing) return;
      if (event.ctrlKey || event.metaKey) {
        event.preventDefault();
        run(event.shiftKey ? compare : translate);
      } else if (event.target === $("domain")) {
        event.preventDefault();
        run(translate);
      }
    });
    load();
  });
})();
