"""An offline estimate of a turn's importance from what its text says.

Salience in ``get_context`` takes memories with importance >= 0.8, and the role
defaults (user 0.5) never get there: "I'm vegetarian with a severe peanut
allergy" was as forgettable as "thanks!", and "Decision: we go with Redis
Streams" as "congrats!!!".  :func:`estimate_importance` reads the text with a few
regular expressions (no model, no network; tens of µs per turn) and scores what
an agent must keep above chit-chat:

* what people say about themselves (``SIGNALS``: health, constraints, budgets,
  needs, preferences, identity, relationships, plans), in a sentence with the
  speaker in it (I, my, we, our ...);
* what a team or a user settles, in any sentence, speaker or not
  (``IMPERSONAL``): decisions ("decision:", "we'll go with", "let's use"),
  standing rules ("always …", "never …", "from now on", "please don't …"),
  corrections ("moved to", "is now", "no longer", "actually, …", "from 6 to 8")
  and explicit requests to remember;
* each sentence is scored on its own: its strongest signal, plus 0.05 for each
  other kind and 0.05 for a number with a unit or money.  Questions score 0, and
  so does a need stated in a turn that asks ("We need a job queue. Kafka or
  Redis Streams?" is a request, not a fact).  Exclamation marks, capitals,
  laughter and emoji are not signals: "WHAT congrats!!!" scores 0;
* only people's turns are read: assistant, tool and system turns score 0, so
  their role default stands (``events.importance_for`` keeps the larger).

It is a heuristic: it errs towards first-person statements and settled facts,
and salience is a budget (5 items by default), so the strongest kinds (health,
constraints, rules) score highest.  ``Settings(estimate_importance=False)``
turns it off.
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

#: Words after a sentence-opening "always"/"never" that make it no instruction
#: ("Never mind", "Always happy to help", "Never been better").
_NOT_RULES = (
    r"(?:mind|again|ever|been|seen|heard|thought|knew|know|imagined|felt|realized|realised|"
    r"expected|a|an|the|too|enough|happy|glad|here|there|good|great|nice|fun|welcome|was|is|"
    r"so|such|wanted|dreamed|fails?|gets? old|give up|stop|change|be yourself|be there|"
    r"had|have|has|did|do|does|say|up|\w+ed|\w+ing|\w*[^\Ws]s)\b"
)
#: What "go with" someone or something social is, not a choice ("going with my sister").
_NOT_CHOICES = (
    r"(?:my|our|your|his|her|their|him|them|you|me|us|the flow|friends|family|it|that|"
    r"this|a friend|some friends)\b"
)
#: "is now" of a moment, not of a changed fact ("it's now or never", "it's now 3pm").
_NOT_NOW = (
    r"(?:or never|the time|a good time|time|\d|one|two|three|four|five|six|seven|eight|nine|"
    r"ten|over|done|gone|finished|ready|clear|official|so|really|very|a lot|much)\b"
)
#: What follows ", not" in a sentence that corrects nothing ("fun, not gonna lie").
_NOT_CONTRAST = (
    r"(?:gonna|going|sure|really|bad|much|yet|too|that|so|just|only|even|exactly|quite|"
    r"always|necessarily|at all|anymore|now|me|you|him|her|them|us|to|a\s+(?:lot|big|fan))\b"
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
            r"\b(?:please remember|remember that (?!time|day|night|one|place|song|movie|trip)|"
            r"remind me|don't forget|do not forget|for future reference|keep in mind that|"
            r"(?<!'ll )(?<!will )keep (?:that|this|it) in mind|note that|make a note|"
            r"for the record)\b",
        ),
    ),
    # a standing rule: "always …"/"never …" opening an instruction, "from now on",
    # "please don't …" (an imperative's verb has no -s, -ed or -ing: "never gives up" is
    # praise, "always admired" a memory)
    (
        "rule",
        0.9,
        re.compile(
            r"\b(?:(?:always|never)\s+(?:use|run|push|commit|merge|deploy|call|write|add|put|ask|"
            r"answer|reply|respond|include|mention|send|check|test|pin|format|lint|store|log|"
            r"hard-?code|expose|disable|enable|skip|delete|drop)\b"
            r"|(?:must|should|shall|has to|have to|needs? to)\s+(?:always|never)\s+\w"
            r"|(?:from now on|going forward|from here on|henceforth)\b"
            r"|(?:please\s+(?:don't|do not|never|stop|avoid)|don't ever|do not ever)\s+"
            r"(?!worry|apologi[sz]e|hesitate|mention it|be sorry|feel|thank|bother|be shy|"
            r"be a stranger|rush|stress|panic|mind|forget|quit|give up|stop|change|lose|doubt)\w)"
            r"|(?:^|[:;(]\s*|\b(?:ok|okay|also|btw|so|and|please)[,.!]\s+)"
            r"(?:please\s+)?(?:always|never)\s+(?!" + _NOT_RULES + r")\w",
        ),
    ),
    # a decision taken: "decision: …", "we decided", "we'll go with", "let's use"
    (
        "decision",
        0.85,
        re.compile(
            r"\bdecision\s*(?::|is\b|was\b|made\b|taken\b)|\bdecided\s*(?::|to\b|on\b|that\b|"
            r"we\b|against\b)|\b(?:we|i|let's|lets)(?:'ll|\s+will|'re going|\s+are going|"
            r"'m going|\s+am going)?\s+(?:go|going)\s+with\s+(?!" + _NOT_CHOICES + r")\w"
            r"|\b(?:let's|lets)\s+(?:use|stick with|stay with|switch to|adopt|standardi[sz]e on|"
            r"settle on|drop|move to|pick|choose|keep using)\b"
            r"|\b(?:settled on|agreed on|agreed that|we agreed|the plan is to|we chose|"
            r"we picked|we standardi[sz]ed on)\b",
        ),
    ),
    # a correction or a change of a fact: "moved to", "is now", "no longer", "from 6 to 8"
    (
        "correction",
        0.85,
        re.compile(
            r"\b(?:(?:mov(?:e|ed|es|ing)|migrat(?:e|ed|es|ing)|switch(?:ed|es|ing)?|chang(?:ed|ing)|"
            r"renam(?:e|ed|es|ing)|upgrad(?:e|ed|es|ing)|downgrad(?:e|ed|es|ing)|"
            r"replac(?:e|ed|es|ing))\b(?!\s+on\b)[^.!?;,]{0,40}?\b(?:to|from)\b"
            r"|mov(?:e|ed|es|ing)\s+off\b|replac(?:e|ed|es|ing)\b[^.!?;,]{0,40}?\bwith\b"
            r"|(?:bump|rais|lower|increas|decreas|reduc|cut|set)\w*\b[^.!?;,]{0,40}?"
            r"\b(?:to|from|by)\s+v?\d"
            r"|(?:goes|go|went|gone|going)\s+(?:up\s+|down\s+)?from\b[^.!?;]{1,40}?\bto\b"
            r"|from\s+v?\d[\w.:]*\s+to\s+v?\d"
            r"|(?:is|are|s|re)\s+now\s+(?!" + _NOT_NOW + r")\w"
            r"|no longer\b|not\s+\w+\s+anymore\b"
            # "use X instead", not "you can use X instead" (a suggestion)
            r"|u(?<!can u)(?<!could u)(?<!might u)(?<!may u)(?:se|sing)\b[^.!?;]{0,60}\binstead\b"
            r"|(?:prefer|switch\w*|go with|went with|chose|choose|pick\w*|let's|lets)\b"
            r"[^.!?;]{0,60}\binstead\b"
            r"|instead of\b[^.!?;]{0,60}\b(?:use|using|run|call)\b"
            r"|(?:use|using)\s+\S+\s+(?:not|rather than)\s+\w)"
            r"|\d[^.!?;]{0,40}\binstead of\s+(?:the\s+)?\d"
            r"|,\s+not\s+(?!" + _NOT_CONTRAST + r")(?:\S+\s+){0,2}\S+[.!]?$"
            r"|(?:^|[:;]\s*)(?:actually|correction|update|erratum|scratch that|wait,? no)\b[,:]?\s*"
            r"(?!never ?mind|no\b|yes\b|nothing|forget it|that's (?:fine|ok|okay|great|good|cool)"
            r"|i\b|i'm\b|we\b|it was\b|lol|haha)\w",
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
            r"minute|moment|second|celebrate|party|catch up|hang out|meet up|get together|"
            r"hug|do (?:this|that|it) again|try (?:it|this|that)|forget|mess up|do that)\b)\w"
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
#: Kinds read in every sentence, the speaker in it or not: what a team settles is
#: said of the project ("the API moved to port 8443"), not of oneself.
IMPERSONAL = frozenset({"remember", "rule", "decision", "correction"})
#: Kinds that, in a turn that asks something, are the question's context, not a fact
#: ("We need a job queue for invoice PDFs. Kafka or Redis Streams?").
REQUESTS = frozenset({"need"})
#: What every match of an ``IMPERSONAL`` kind holds at a word's start (read
#: lowercased; a stem holds its forms): a sentence without one is read for the
#: speaker's kinds only, and a text without one nor a speaker word scores 0 unread.
SETTLED_CUES = (
    "remember", "remind me", "forget", "for future reference", "in mind", "note that",
    "make a note", "for the record", "always", "never", "going forward", "henceforth",
    "please", "ever", "decision", "decided", r"go\s+with", r"going\s+with", "let's", "lets",
    "settled on", "agreed", "plan is to", "chose", "picked", "standardi", "mov", "migrat",
    "switch", "chang", "renam", "upgrad", "downgrad", "replac", "bump", "rais", "lower",
    "increas", "decreas", "reduc", "cut", "set", "from", r"is\s+now", r"are\s+now", r"s\s+now",
    r"re\s+now", "no longer", "anymore", "instead", r"use\b", "using", "actually", "correction",
    "update", "erratum", "scratch that", "wait",
)  # fmt: skip


def _by_first_letter(phrases: Sequence[str]) -> str:
    """``a(?:lways|greed)|b(?:ump)|…``: one alternative per first letter, which the
    regex engine rejects with one comparison (a flat list of 57 costs 5 µs a text)."""
    groups: dict[str, list[str]] = {}
    for phrase in phrases:
        groups.setdefault(phrase[0], []).append(phrase[1:])
    return "|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in groups.items())


_SETTLED_CUES = r"\b(?:" + _by_first_letter(SETTLED_CUES) + r")|,\s+not\b"
_SETTLED = re.compile(_SETTLED_CUES)
#: A speaker word or a settled cue: a text without one has no sentence that scores.
#: Both are searched by RE2 too (no look-arounds), over a whole column at once.
_CUES = re.compile(r"\b(?:i|im|me|my|mine|myself|we|us|our|ours)\b|" + _SETTLED_CUES)
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
#: Where a text splits into sentences (the correction step of search reads them too).
SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+|;\s*")


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
    if _CUES.search(text.lower()) is None:
        # every signal needs a cue word, and a sentence is a piece of the text cut at
        # non-word characters: no cue in the whole text, none in any sentence
        return 0.0
    sentences = [part for s in SENTENCES.split(text) if (part := s.strip())]
    asks = any(sentence.endswith("?") for sentence in sentences)
    return max((_sentence_score(sentence, asks) for sentence in sentences), default=0.0)


def estimate_importances(texts: Sequence[str], roles: Sequence[str]) -> list[float]:
    """:func:`estimate_importance` of each (text, role), the texts without a cue word
    (most, in bulk loads of machine text) found by one RE2 search of the column
    rather than one Python regex search per text."""
    scored = [i for i, (text, role) in enumerate(zip(texts, roles, strict=True))
              if text and role not in UNSCORED_ROLES]  # fmt: skip
    out = [0.0] * len(texts)
    if not scored:
        return out
    column = pa.array([texts[i] for i in scored], pa.string())
    ascii_only = pc.string_is_ascii(column)
    speaking = pc.match_substring_regex(column, _CUES.pattern, ignore_case=True)
    # RE2's \b and case folding are ASCII's: on ASCII text it finds what the regex finds
    # (and more: the part past MAX_CHARS); other texts are read one by one
    maybe = pc.or_(pc.invert(ascii_only), speaking).to_numpy(zero_copy_only=False)
    for k in np.flatnonzero(maybe).tolist():
        out[scored[k]] = estimate_importance(texts[scored[k]], roles[scored[k]])
    return out


def _sentence_score(sentence: str, asks: bool = False) -> float:
    """The strongest signal of one sentence plus the bonuses; 0 for a question.

    Without the speaker in it only the ``IMPERSONAL`` kinds count; in a turn that
    ``asks`` something, the ``REQUESTS`` kinds do not."""
    if sentence.endswith("?") and _is_question(sentence):
        return 0.0
    low = sentence.lower()
    speaker = _SPEAKER.search(low) is not None
    settled = _SETTLED.search(low) is not None
    if not (speaker or settled):
        return 0.0
    scores = [
        score
        for kind, score, pattern in SIGNALS
        if (settled if kind in IMPERSONAL else speaker)
        and not (asks and kind in REQUESTS)
        and pattern.search(sentence if kind == "named" else low)
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
