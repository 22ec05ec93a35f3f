from textkit import top_words, word_count, word_frequencies, words


def test_words_keep_apostrophes_and_hyphens():
    assert words("Don't panic: it's a well-known fact.") == [
        "don't", "panic", "it's", "a", "well-known", "fact",
    ]


def test_word_count_ignores_punctuation_and_underscores():
    assert word_count("one, two... three!") == 3
    assert word_count("snake_case") == 2
    assert word_count("   ") == 0


def test_word_frequencies_are_case_insensitive():
    assert word_frequencies("The cat and the hat") == {"the": 2, "cat": 1, "and": 1, "hat": 1}


def test_top_words_breaks_ties_alphabetically():
    text = "b a c b a d"
    assert top_words(text, 3) == [("a", 2), ("b", 2), ("c", 1)]


def test_top_words_with_fewer_words_than_n():
    assert top_words("solo", 5) == [("solo", 1)]
