"""The conversation corpus the template parity tests render: hand-written cases
for every shape a chat template branches on, then seeded random mixtures of
them. Deterministic: the same list on every run.

Each record is {"messages": [...]} plus, for tool cases, {"tools": [...]}, as
`evenkeel template render` reads it and as apply_chat_template takes it.
"""

import copy
import random

# Text that stresses what a renderer can get wrong: astral code points (UTF-16
# surrogate pairs in tojson's ensure_ascii, one code point in Python's len and
# slicing), combining marks, right-to-left scripts, zero-width joiners,
# Unicode whitespace that str.strip() removes, line separators that
# str.splitlines() splits on, Jinja syntax and special tokens as plain data.
UNICODE = [
    "naïve café — ünïcödé",
    "e\u0301 a\u0308 n\u0303 (combining marks) Å",
    "😀 👩\u200d👩\u200d👧 🇫🇷 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐍈",
    "مرحبا بالعالم — שלום עולם \u200fRTL\u200e mark",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "\u00a0non-breaking\u00a0space\u3000ideographic\u2003em\u2028line sep\u2029para sep",
    "tabs\tand\nnewlines\r\nand CRLF\n\n",
    "   leading and trailing spaces   ",
    "Jinja in data: {{ messages }} {% if x %} {# c #} and '\"quotes\"' \\backslash\\",
    "special tokens as text: <|im_end|> <|eot_id|> <end_of_turn> </s> <think>",
    "<think>\nplanted reasoning\n</think>\n\nafter",
    "\x07 bell \x1b[31m escape \x00 nul",
    "ΣΊΣΥΦΟΣ ß ǅ ﬁ İ",
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather — °C or °F.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "number", "default": 2.5},
                "safe": {"type": "boolean", "default": True},
                "filters": {"type": "array", "items": {"type": "string"}, "nullable": None},
            },
            "required": ["query"],
        },
        "return": {"type": "string"},
    },
}


def _call(name, args, call_id=None, as_string=False):
    import json

    c = {"type": "function", "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}
    if call_id:
        c["id"] = call_id
    return c


def hand_written():
    R = []
    u, a, s = "user", "assistant", "system"

    def m(role, content, **kw):
        d = {"role": role, "content": content}
        d.update(kw)
        return d

    R.append({"messages": [m(u, "Hello!")]})
    R.append({"messages": [m(s, "You are a helpful assistant."), m(u, "What is 2+2?"), m(a, "4")]})
    R.append({"messages": [m(u, "Hi"), m(a, "Hello! How can I help?"), m(u, "Tell me a joke."),
                           m(a, "Why did the chicken cross the road?"), m(u, "Why?"), m(a, "To get to the other side.")]})
    R.append({"messages": [m(s, "Be terse."), m(u, "one"), m(a, "1"), m(u, "two"), m(a, "2"), m(u, "three")]})
    R.append({"messages": [m(u, ""), m(a, "")]})
    R.append({"messages": [m(s, ""), m(u, "empty system"), m(a, "ok")]})
    R.append({"messages": [m(u, "   "), m(a, "\n\n")]})
    for i, t in enumerate(UNICODE):
        msgs = [m(u, t), m(a, UNICODE[(i + 3) % len(UNICODE)])]
        if i % 3 == 0:
            msgs.insert(0, m(s, UNICODE[(i + 5) % len(UNICODE)]))
        R.append({"messages": msgs})
    # Reasoning, under each of the names transformers aliases.
    R.append({"messages": [m(u, "Think first: 17*3?"), m(a, "51", reasoning_content="17*3 = 51.")]})
    R.append({"messages": [m(u, "Why is the sky blue?"), m(a, "Rayleigh scattering.", reasoning_content="  Shorter \n wavelengths scatter more.\n"),
                           m(u, "And sunsets?"), m(a, "Longer path, blue scattered away.", reasoning_content="Path length 🌅.")]})
    R.append({"messages": [m(u, "q"), m(a, "a", reasoning="via the 'reasoning' key")]})
    R.append({"messages": [m(u, "q"), m(a, "a", thinking="via the 'thinking' key")]})
    R.append({"messages": [m(u, "q"), m(a, "<think>\ninline reasoning\n</think>\n\nanswer")]})
    R.append({"messages": [m(s, "sys"), m(u, "q"), m(a, "a", reasoning_content=""), m(u, "q2")]})
    # Tools, tool calls (arguments as objects and as JSON strings), tool results.
    tools = [WEATHER_TOOL, SEARCH_TOOL]
    R.append({"messages": [m(u, "Weather in Paris?")], "tools": tools})
    R.append({"messages": [m(s, "You can call tools."), m(u, "Weather in Zürich, 3 days?"),
                           {"role": a, "content": None,
                            "tool_calls": [_call("get_weather", {"city": "Zürich", "unit": "celsius", "days": 3}, "call_1")]},
                           {"role": "tool", "content": '{"temp": 21.5, "sky": "☀️"}', "tool_call_id": "call_1", "name": "get_weather"},
                           m(a, "It is 21.5 °C and sunny.")], "tools": tools})
    R.append({"messages": [m(u, "Search two things"),
                           {"role": a, "content": "Searching.",
                            "tool_calls": [_call("search", {"query": "a", "limit": 1.0, "safe": False, "filters": None}, "c1"),
                                           _call("search", {"query": "日本", "limit": 1e-05, "filters": ["x", "y"]}, "c2")]},
                           {"role": "tool", "content": "result A", "tool_call_id": "c1"},
                           {"role": "tool", "content": "result B: 1e16 ≥ 10", "tool_call_id": "c2"},
                           m(a, "Done.")], "tools": tools})
    R.append({"messages": [m(u, "string arguments"),
                           {"role": a, "content": "", "tool_calls": [_call("get_weather", {"city": "Oslo"}, "x9", as_string=True)]},
                           {"role": "tool", "content": "cold"}, m(u, "thanks")], "tools": [WEATHER_TOOL]})
    R.append({"messages": [m(u, "think then call"),
                           {"role": a, "content": "", "reasoning_content": "Need the weather.",
                            "tool_calls": [_call("get_weather", {"city": "Rome", "nested": {"a": [1, 2.5, True, None, "ü"]}})]},
                           {"role": "tool", "content": "warm"}, m(a, "Warm in Rome.", reasoning_content="Tool said warm.")],
              "tools": tools})
    R.append({"messages": [m(u, "tools but no call"), m(a, "No tool needed.")], "tools": [SEARCH_TOOL]})
    # Content as a list of parts (multimodal templates read them; others print them).
    R.append({"messages": [{"role": u, "content": [{"type": "text", "text": "Describe this."}]},
                           {"role": a, "content": [{"type": "text", "text": "A list-of-parts reply."}]}]})
    # Odd but legal: extra keys, None values (dropped), system only, assistant first, long.
    R.append({"messages": [m(u, "extra keys", name="alice", weight=0.5, meta={"k": [1, 2]}), m(a, "ok", tool_calls=None)]})
    R.append({"messages": [m(s, "Only a system prompt.")]})
    R.append({"messages": [m(a, "The assistant speaks first."), m(u, "odd")]})
    long_msgs = [m(s, "Long conversation.")]
    for i in range(12):
        long_msgs.append(m(u, f"turn {i}: " + UNICODE[i % len(UNICODE)]))
        long_msgs.append(m(a, f"reply {i} " + "word " * (i * 7)))
    R.append({"messages": long_msgs})
    R.append({"messages": [m(u, "numbers"), m(a, "0.1 + 0.2 = 0.30000000000000004; 1e300; -0.0; 10**20")]})
    R.append({"messages": [m("developer", "A developer message."), m(u, "hi")]})
    R.append({"messages": [m(u, "a"), m(u, "two users in a row"), m(a, "b"), m(a, "two assistants")]})
    R.append({"messages": [m("narrator", "an unknown role"), m(u, "hi")]})
    # Unicode whitespace str.strip() removes (and Jinja's trim), at both ends.
    R.append({"messages": [m(s, "\u2003\u00a0 sys \u2028\x1c\x85"), m(u, "\u3000\tq\u205f\n"),
                           m(a, "\u200b zero-width is not whitespace \u200b", reasoning_content="\u2029 r \u00a0")]})
    # Parts whose repr Python prints when a template prints the list: quotes,
    # non-printable characters (escaped by repr), astral and RTL text.
    R.append({"messages": [{"role": u, "content": [{"type": "image"}, {"type": "text", "text": "It's \"quoted\" \u200f עברית 😀\x07\u00a0"}]},
                           {"role": a, "content": [{"type": "text", "text": "multi\nline\ttab \\ back"}]}]})
    R.append({"messages": [{"role": u, "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}]})
    # Non-string content.
    R.append({"messages": [m(u, 42), m(a, 2.5), m(u, True)]})
    # Tool calls whose arguments stress json.dumps and str(): float layouts,
    # big integers, -0.0, unicode keys, empty containers, key order.
    R.append({"messages": [m(u, "numbers please"),
                           {"role": a, "tool_calls": [
                               {"function": {"name": "calc", "arguments": {
                                   "z": 1e16, "y": 1.5e-07, "x": 123456789012345678, "w": -0.0, "v": 0.1, "u": 3.0,
                                   "ключ": "значение", "empty": {}, "list": [], "deep": {"a": {"b": [[1], {"c": None}]}},
                                   "s": "quote\" backslash\\ newline\n tab\t ctrl\x01 del\x7f 😀"}}}]},
                           {"role": "tool", "content": {"result": 7, "note": "a dict as content"}},
                           {"role": "tool", "content": ["a", "list", 1]},
                           m(a, "ok")],
              "tools": [{"name": "calc", "description": "no 'type' wrapper", "parameters": {"type": "object", "properties": {}}}]})
    R.append({"messages": [m(u, "q"), {"role": a, "content": "calling",
                                        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "not json {"}}]},
                           {"role": "tool", "content": ""}]})
    return R


def random_mixtures(n, seed=14):
    rng = random.Random(seed)
    base = hand_written()
    out = []
    for _ in range(n):
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(UNICODE + ["You are helpful.", ""])})
        for t in range(rng.randint(1, 4)):
            msgs.append({"role": "user", "content": rng.choice(UNICODE + ["Hi", "", "?"])})
            if t < 3 or rng.random() < 0.5:
                a = {"role": "assistant", "content": rng.choice(UNICODE + ["Sure.", "", "   ok   "])}
                if rng.random() < 0.3:
                    a["reasoning_content"] = rng.choice(UNICODE + ["Let me think.", ""])
                msgs.append(a)
        rec = {"messages": msgs}
        if rng.random() < 0.2:
            donor = rng.choice([r for r in base if "tools" in r])
            rec = copy.deepcopy(donor)
            rec["messages"] = msgs[:1] + rec["messages"]
        out.append(rec)
    return out


def corpus():
    return hand_written() + random_mixtures(24)
