"""Compaction: a conversation that no longer fits made smaller, by named strategies (pure, no I/O).

    module           holds
    turns.py         the last user turn (never touched, nor anything after it, nor the system prompt)
    tool_results.py  old tool results shortened to a note naming the tool and what was removed
    reasoning.py     reasoning before the last user turn dropped (the current turn's signed reasoning kept)
    summary.py       the prefix a summary replaces, the summarizer's request, its cache key, the summary turn
    cache.py         summaries kept in the process (bounded), and what a shared state backend offers
    report.py        what a compaction tells the observer (its ``compaction`` span)

The strategies are ``conversation.Overflow``'s names; the engine that runs them in order, measures each
step, calls the summarizer and answers CONTEXT_OVERFLOW when even the result does not fit is
``providers.compacting`` (docs/reliability.md#compaction). A tool call and its result stay paired: a
result is shortened, never removed, and a summary ends where a user turn begins.
"""
