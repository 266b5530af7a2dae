"""An offline estimate of a turn's importance from what its text says.

Salience in ``get_context`` takes memories with importance >= 0.8, and the role
defaults (user 0.5) never get there: "I'm vegetarian with a severe peanut
allergy" was as forgettable as "thanks!".  :func:`estimate_importance` reads the
text with a few regular expressions (no model, no network; tens of µs per turn)
and scores what people say about themselves above chit-chat:

* each sentence is scored on its own; questions ("what should we eat?") score 0,
  and so does a sentence without the speaker in it (I, my, we, our ...);
* a sentence scores the strongest signal it matches (``SIGNALS``), plus 0.05
  for each other kind of signal and 0.05 for a number with a unit or money;
* only people's turns are read: assistant, tool and system turns score 0, so
  their role default stands (``events.importance_for`` keeps the larger).

It is a heuristic: it errs towards first-person statements, and salience is a
budget (5 items by default), so the strongest kinds (health, constraints) score
highest.  ``Settings(estimate_importance=False)`` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Turns of these roles are not read (the role default stands).
UNSCORED_ROLES = frozenset({"assistant", "tool", "system"})
#: Only the beginning of a long text is read (keeps the cost bounded).
MAX_CHARS = 4000
#: Extra score for each further kind of signal, and for a number with a unit.
BONUS = 0.05

_I = r"\b(?:i|we)(?:\s+(?:really|just|also|still|absolutely|definitely|totally|honestly))?"
_I_AM = r"\b(?:i\s+am|i'm|im|we\s+are|we're)(?:\s+(?:really|also|still|actually))?"
_MY = r"\b(?:my|our)"
_RELATIVES = (
    r"(?:wife|husband|partner|spouse|boyfriend|girlfriend|fianc[eé]e?|sons?|daughters?|kids?|"
    r"child|children|bab(?:y|ies)|mom|mum|mother|dad|father|parents?|sisters?|brothers?|"
    r"siblings?|grand\w+|aunt|uncle|cousins?|nephew|niece|in-laws|boss|manager|"
    r"roommate|flatmate|neighbou?r|colleague|coworker|best friend|dogs?|cats?|pupp(?:y|ies)|"
    r"kitten|pets?|toddlers?|newborn|twins)"
)

#: (kind, score, pattern): what a sentence may say, strongest kinds first.
SIGNALS: list[tuple[str, float, re.Pattern[str]]] = [
    # health, diet and access needs said by the speaker (allergies, diets, disabilities)
    (
        "health",
        0.95,
        re.compile(
            r"\b(?:allerg\w*|anaphyla\w*|epi-?pens?|intoleran\w*|vegetarian|vegan|pescatarian|"
            r"gluten|co?eliac|lactose|dairy[- ]free|nut[- ]free|halal|kosher|diabet\w*|"
            r"insulin|asthma\w*|epilep\w*|seizures?|pregnan\w*|wheelchair|crutches|disab\w*|"
            r"blind|deaf|hearing aids?|medications?|prescri\w*|surgery|diagnos\w*|chronic|"
            r"migraines?|adhd|autis\w*|dyslexi\w*|vertigo|claustrophob\w*|phobi\w*|"
            r"afraid of|scared of|heart condition|blood pressure|injur\w*)\b",
        ),
    ),
    # an explicit request to remember ("remember that", "for future reference")
    (
        "remember",
        0.9,
        re.compile(
            r"\b(?:please remember|remember that (?!time|day|night)|remind me|don't forget|"
            r"do not forget|for future reference|keep in mind that|note that|make a note)\b",
        ),
    ),
    # negation of ability or limits: "I can't eat", "we're not allowed to", "I don't drive"
    (
        "constraint",
        0.9,
        re.compile(
            _I + r"\s+(?:can't|cannot|can not|couldn't|don't|do not|never|"
            r"refuse to)\s+(?!(?:really\s+|even\s+)?(?:wait|believe|thank|imagine|complain|say|"
            r"tell|agree|stop|help|remember|decide|argue|blame|express|describe|know|think|mind|"
            r"care|understand|get|see|doubt|mean|forget|expect|thought|knew|realized|realised|"
            r"regret|feel|right now|now|yet|either|anymore|have (?:a clue|any idea|time))\b)\w"
            r"|" + _I_AM + r"\s+(?:not able|unable|not allowed|forbidden)\b",
        ),
    ),
    # budgets, deadlines and money limits (with the speaker in the sentence)
    (
        "budget",
        0.9,
        re.compile(
            r"\b(?:budget\w*|afford|deadline|due (?:by|on|date)|no later than|at the latest|"
            r"at most|no more than|maximum|spend up to)\b",
        ),
    ),
    # needs and obligations: "I need", "we have to", "I must", "I always"
    (
        "need",
        0.85,
        re.compile(
            _I + r"\s+(?:need|have to|must|should avoid|can only|only eat|only drink|always|"
            r"usually)\s+(?!(?:to\s+|a\s+|some\s+)?(?:go|run|leave|get going|sleep|think|check|"
            r"see|say|wanted|thought|dreamed|wondered|knew|loved|coffee|break|nap|rest|drink|"
            r"minute|moment|second)\b)\w"
            r"|\b(?:every|each)\s+(?:day|morning|night|evening|week|weekend|month|year|"
            r"(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b",
        ),
    ),
    # preferences and dislikes, not reactions ("I love hiking", not "I love that")
    (
        "preference",
        0.85,
        re.compile(
            _I + r"\s+(?:(?:do|don't|do not)\s+(?:really\s+)?)?(?:love|like|enjoy|adore|hate|"
            r"dislike|detest|loathe|prefer|despise)\s+(?!it\b|that\b|this\b|those\b|these\b|"
            r"them\b|you\b|your\b|yours\b|the idea\b|the way\b|how\b|what\b|when\b|hearing\b|"
            r"seeing\b|"
            r"to (?:say|bother|admit|interrupt|hear|see|think|know)\b)\w"
            r"|\b(?:i'd|we'd|i would|we would)\s+(?:rather|prefer)\b|\bcan't stand\b"
            r"|\b(?:my|our)(?<!that's my)(?<!this is my)(?<!it's my)"
            r"\s+(?:favou?rite|preference|go-to)\b|\bnot a (?:big |huge )?fan\b"
            r"|" + _I_AM + r"\s+(?:a\s+)?(?:big\s+|huge\s+)?(?:fan of|into)\b",
        ),
    ),
    # identity: name, job, home, status ("my name is", "I work as", "I live in", "I'm a nurse")
    (
        "identity",
        0.85,
        re.compile(
            r"\b(?:my name(?:'s| is)|call me|i was born|i grew up)\b"
            r"|" + _I + r"\s+(?:live|lived|work|worked|study|studied|teach|moved|relocated)\b"
            r"(?! out)"
            r"|" + _I_AM + r"\s+(?:from|based in|originally from|(?:a|an)\s+(?!bit\b|little\b|"
            r"lot\b|tad\b|mess\b|fan\b|big fan\b|huge fan\b)\w+|\d+(?: years old)?\b|married|"
            r"divorced|engaged|single|widowed|retired|unemployed|self-employed|studying|"
            r"working (?:as|at|for|in)|living in)"
            r"|" + _MY + r"\s+(?:job|work|career|profession|company|employer|office|home|house|"
            r"apartment|flat|hometown|address|birthday|age|degree|major|phone|email|business|"
            r"shop|store|studio|startup|school|university|college)\b",
        ),
    ),
    # relationships: family, partners, pets ("my sister", "our kids")
    (
        "relationship",
        0.8,
        re.compile(
            r"(?:" + _MY + r"|" + _I + r"(?:'ve|\s+have)?\s+(?:have|has|got)\s+(?:a|an|one|two|"
            r"three|four|\d+)?)\s+(?:\w+[- ])?" + _RELATIVES + r"\b",
        ),
    ),
    # an amount of money said by the speaker ("we can spend 200 euros", "I earn $60k")
    (
        "money",
        0.85,
        re.compile(r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:k\b|dollars|euros|pounds|yen|usd|eur|gbp|bucks)"),
    ),
    # a named entity after "my" ("my friend Ana", "my Honda"; case matters)
    (
        "named",
        0.8,
        re.compile(r"\b[Mm]y\s+(?:[a-z]+\s+)?(?!God\b|Gosh\b|Goodness\b|Lord\b)[A-Z][a-z]+"),
    ),
    # plans and decisions: "I decided", "I booked", "I'm going to", "my flight", "my goal is"
    (
        "plan",
        0.8,
        re.compile(
            _I + r"(?:'ve|\s+have)?\s+(?:finally\s+)?(?:decided|chose|chosen|picked|booked|"
            r"reserved|signed up|registered|enrolled|committed|promised|agreed to|bought|"
            r"adopted|joined|started|quit|switched|applied|accepted|scheduled|settled on)\b"
            r"(?!\s+to\s+(?:wonder|think|feel|realize|realise|get|see)\b)"
            r"|" + _I + r"(?:'m going to|\s+am going to|'re going to|\s+are going to|'m gonna|"
            r"'re gonna|\s+plan to|\s+plan on|'m planning|'re planning|\s+intend to)\s+"
            r"(?!keep|try|think|see|have to see)\w"
            r"|" + _MY + r"\s+(?:flight|trip|wedding|appointment|interview|exam|reservation|"
            r"booking|move|vacation|holiday|anniversary)s?\b"
            r"|" + _MY + r"\s+(?:plan|goal|dream)s?\s+(?:is|are|was|for)\b",
        ),
    ),
    # commitments with a date: "we will fly on the 12th", "I'd like to leave by 6pm"
    (
        "dated",
        0.8,
        re.compile(
            _I + r"(?:'ll|\s+will|\s+shall|\s+want to|\s+hope to|'d like to|\s+would like to)"
            r"\s+(?!think|check|see|try|let|get back|keep|look|do that|do it|be fine|be ok|"
            r"be there|be right|take a look|talk|chat|catch|miss|say|thank|know|hear|ask)\w"
        ),
    ),
]
#: A date or a time, which "dated" needs in the same sentence (read lowercased).
_WHEN = re.compile(
    r"\b(?:tomorrow|tonight|next (?:week|month|year|weekend|\w+day)|this (?:week|weekend|"
    r"month|year|summer|winter|spring|fall|autumn|morning|afternoon|evening)|in the (?:morning|"
    r"afternoon|evening)|(?:on|by|until) (?:mon|tues|wednes|thurs|fri|satur|sun)day|"
    r"(?:in|by|until) (?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december)|on the \d+(?:st|nd|rd|th)?|\d{1,2}(?::\d{2})?\s?(?:am|pm))\b"
)

#: The speaker in a sentence (read lowercased): every signal needs one.
_SPEAKER = re.compile(
    r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'll|we'd|us|our|ours)\b"
)
#: The first word of every speaker match (``i'm`` starts with the word ``i``): a
#: text without one has no sentence with the speaker in it.
_ANY_SPEAKER = re.compile(r"\b(?:i|im|me|my|mine|myself|we|us|our|ours)\b")
#: A number with a unit, an amount of money or a time of day (read lowercased).
_QUANTITY = re.compile(
    r"[$€£¥]\s?\d|\b\d[\d,.]*\s?(?:k|%|dollars?|euros?|pounds?|yen|usd|eur|gbp|bucks|km|miles?|"
    r"kg|lbs?|cm|hours?|hrs?|minutes?|mins?|days?|weeks?|months?|years?|am|pm|people|"
    r"nights?|rooms?|tickets?)\b|\b\d{1,2}:\d{2}\b"
)
#: A question: ends with "?" and opens with an interrogative or an auxiliary verb.
_QUESTION_START = re.compile(
    r"(?:what|what's|whats|how|how's|why|where|when|who|whom|whose|which|can|could|would|"
    r"will|should|shall|do|does|did|is|isn't|are|aren't|was|were|am|have|has|had|any|"
    r"anything|may|might|don't|doesn't|didn't|won't|wouldn't|can't|recommend|got|know|"
    r"wanna|want|tell me|ever)\b",
    re.IGNORECASE,
)
#: What may precede a question's first word: a "Speaker:" tag, interjections, a vocative.
_LEAD = re.compile(
    r"(?:[A-Z][\w .'-]{0,40}:\s+)?(?i:(?:hey|hi|hello|oh|ah|ok|okay|so|and|but|well|um|uh|"
    r"wow|yeah|yes|no|haha|lol|btw|also|hmm|sure|great|cool|nice|thanks)\b[\s,!.]*)*"
    r"(?:[A-Z][a-z]+,\s+)?"
)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+|;\s*")


def estimate_importance(text: str, role: str) -> float:
    """How important ``text`` said by ``role`` looks, in 0..1 (0 = nothing to keep).

    >>> estimate_importance("I'm vegetarian with a severe peanut allergy", "user")
    0.95
    >>> estimate_importance("Thanks, sounds good!", "user")
    0.0
    >>> estimate_importance("I'm vegetarian", "assistant")
    0.0
    """
    if role in UNSCORED_ROLES or not text:
        return 0.0
    text = text[:MAX_CHARS].replace("\u2019", "'")
    if _ANY_SPEAKER.search(text.lower()) is None:
        # every sentence needs the speaker, and a sentence is a piece of the text cut at
        # non-word characters: no speaker in the whole text, none in any sentence
        return 0.0
    return max((_sentence_score(s.strip()) for s in _SENTENCES.split(text) if s), default=0.0)


def estimate_importances(texts: Sequence[str], roles: Sequence[str]) -> list[float]:
    """:func:`estimate_importance` of each (text, role), the texts without a speaker
    (most, in bulk loads of machine text) found by one RE2 search of the column
    rather than one Python regex search per text."""
    scored = [i for i, (text, role) in enumerate(zip(texts, roles, strict=True))
              if text and role not in UNSCORED_ROLES]  # fmt: skip
    out = [0.0] * len(texts)
    if not scored:
        return out
    column = pa.array([texts[i] for i in scored], pa.string())
    ascii_only = pc.string_is_ascii(column)
    speaking = pc.match_substring_regex(column, _ANY_SPEAKER.pattern, ignore_case=True)
    # RE2's \b and case folding are ASCII's: on ASCII text it finds what the regex finds
    # (and more: the part past MAX_CHARS); other texts are read one by one
    maybe = pc.or_(pc.invert(ascii_only), speaking).to_numpy(zero_copy_only=False)
    for k in np.flatnonzero(maybe).tolist():
        out[scored[k]] = estimate_importance(texts[scored[k]], roles[scored[k]])
    return out


def _sentence_score(sentence: str) -> float:
    """The strongest signal of one sentence plus the bonuses; 0 for a question."""
    if sentence.endswith("?") and _is_question(sentence):
        return 0.0
    low = sentence.lower()
    if _SPEAKER.search(low) is None:
        return 0.0
    scores = [
        score
        for kind, score, pattern in SIGNALS
        if pattern.search(sentence if kind == "named" else low)
        and (kind != "dated" or _WHEN.search(low))
    ]
    if not scores:
        return 0.0
    bonus = BONUS * (len(scores) - 1) + (BONUS if _QUANTITY.search(low) else 0.0)
    return round(min(1.0, max(scores) + bonus), 4)


def _is_question(sentence: str) -> bool:
    """Whether a sentence ending in "?" opens like a question (after a tag or a greeting)."""
    lead = _LEAD.match(sentence)
    return _QUESTION_START.match(sentence, lead.end() if lead else 0) is not None
