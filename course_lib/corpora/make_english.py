"""Make english.txt: the course's own small English corpus.

Run it from anywhere with ``python course_lib/corpora/make_english.py``; it writes ``english.txt`` next
to itself. The output is deterministic (a seeded ``random.Random``; no other input), so running the
script again reproduces the committed file byte for byte, and a test checks exactly that.

The corpus is about 130,000 words of short, plain, grammatical sentences, one per line, lowercase,
each ending with a full stop. It is made from templates on purpose: the relationships that the course
teaches must really show up in the co-occurrence counts.

- People come in male/female pairs (king/queen, prince/princess, man/woman, boy/girl, father/mother,
  son/daughter, brother/sister, husband/wife, uncle/aunt, ...). Every sentence about a person is made
  twice, with the same random choices, once about a male and once about a female person ("the king
  sat on his throne" / "the queen sat on her throne"); the lines are shuffled at the end, so the
  twins land far apart. The two words of a pair thus see exactly the same contexts except for the
  gendered words around them (he/she, his/her, himself/herself, male/female), and that gender
  difference is the same for every pair. Royal people share royal contexts (throne, crown,
  kingdom), adults share adult ones (work, car), children share childhood ones (school, toys). That
  is why word2vec finds king - man + woman closest to queen. (The corpus is also gender-balanced:
  king and queen, he and she, ... occur exactly equally often.)
- Countries and capitals come in pairs too (france/paris, italy/rome, spain/madrid, ...), each with a
  language and a dish. Countries appear in country contexts (borders, flags, presidents), capitals in
  city contexts (streets, trains, museums, mayors), and both next to their own language and dish, so
  paris - france + italy lands near rome.
- Everyday topics (food, animals, weather, travel, colours, numbers, time, home, school) and a few
  sentences about language models (the word "transformer" is frequent enough for byte-pair encoding to
  give it a token of its own) make a varied text for counting models and a small GPT.

The sentences were written for this course; the file has the same licence as the course. Nothing here
imports the course package, so the script runs with a bare Python 3.
"""
from __future__ import annotations

import random
from pathlib import Path

SEED = 2017  # the year of "Attention Is All You Need"
TARGET_WORDS = 130_000  # stop once the corpus has this many words
OUTPUT = Path(__file__).resolve().parent / "english.txt"

# ------------------------------------------------------------------------------------------------
# Vocabulary
# ------------------------------------------------------------------------------------------------

# Gendered words: index 0 is the male form, index 1 the female form.
PRONOUN = ("he", "she")  # subject
POSSESSIVE = ("his", "her")
OBJECT = ("him", "her")
REFLEXIVE = ("himself", "herself")

# Person nouns by kind. Each entry is (male, female).
ROYAL_ADULT = [("king", "queen")]
ROYAL_YOUNG = [("prince", "princess")]
COMMON_ADULT = [("man", "woman")]
COMMON_YOUNG = [("boy", "girl")]
FAMILY_ADULT = [("father", "mother"), ("husband", "wife"), ("uncle", "aunt"), ("grandfather", "grandmother")]
FAMILY_YOUNG = [("son", "daughter"), ("brother", "sister"), ("nephew", "niece")]
NAMES = [
    ("tom", "anna"), ("peter", "mary"), ("james", "emma"), ("david", "sarah"), ("paul", "lucy"),
    ("sam", "kate"), ("jack", "alice"), ("ben", "rose"),
]

ADULTS = ROYAL_ADULT + COMMON_ADULT + FAMILY_ADULT
YOUNG = ROYAL_YOUNG + COMMON_YOUNG + FAMILY_YOUNG
ROYALS = ROYAL_ADULT + ROYAL_YOUNG

# country, capital, language, dish
COUNTRIES = [
    ("france", "paris", "french", "croissants"),
    ("italy", "rome", "italian", "pasta"),
    ("spain", "madrid", "spanish", "paella"),
    ("germany", "berlin", "german", "sausages"),
    ("japan", "tokyo", "japanese", "sushi"),
    ("egypt", "cairo", "arabic", "falafel"),
    ("china", "beijing", "chinese", "dumplings"),
    ("russia", "moscow", "russian", "borscht"),
    ("greece", "athens", "greek", "olives"),
    ("kenya", "nairobi", "swahili", "ugali"),
]
CONTINENT = {
    "france": "europe", "italy": "europe", "spain": "europe", "germany": "europe", "japan": "asia",
    "egypt": "africa", "china": "asia", "russia": "europe", "greece": "europe", "kenya": "africa",
}

COLOURS = ["red", "blue", "green", "yellow", "white", "black", "brown", "grey", "orange", "purple"]
NUMBERS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
]
ANIMALS = {  # singular: (plural, food, sound)
    "dog": ("dogs", "meat", "barked"), "cat": ("cats", "fish", "purred"),
    "horse": ("horses", "hay", "neighed"), "cow": ("cows", "grass", "mooed"),
    "sheep": ("sheep", "grass", "bleated"), "bird": ("birds", "seeds", "sang"),
    "mouse": ("mice", "cheese", "squeaked"), "duck": ("ducks", "bread", "quacked"),
    "rabbit": ("rabbits", "carrots", "sniffed"), "goat": ("goats", "leaves", "bleated"),
    "pig": ("pigs", "apples", "grunted"), "fox": ("foxes", "eggs", "barked"),
}
ANIMALS_LIST = list(ANIMALS)
FOODS = ["bread", "rice", "soup", "cheese", "apples", "eggs", "fish", "cake", "potatoes", "beans",
         "carrots", "oranges", "tomatoes", "honey", "salad", "noodles"]
DRINKS = ["tea", "coffee", "milk", "water", "juice", "lemonade"]
TASTES = ["sweet", "salty", "sour", "bitter", "fresh", "delicious", "spicy"]
MEALS = ["breakfast", "lunch", "dinner"]
THINGS = {  # singular: plural
    "book": "books", "chair": "chairs", "table": "tables", "cup": "cups", "hat": "hats",
    "ball": "balls", "box": "boxes", "flower": "flowers", "car": "cars", "door": "doors",
    "coat": "coats", "shoe": "shoes", "bag": "bags", "kite": "kites", "pen": "pens",
}
PLACES = ["market", "park", "library", "station", "river", "beach", "garden", "shop", "village",
          "forest", "bridge", "museum", "harbour", "farm", "hill"]
VEHICLES = ["train", "bus", "plane", "boat", "car", "bicycle"]
WEATHER = ["sunny", "rainy", "windy", "cloudy", "cold", "warm", "hot", "foggy", "snowy"]
SEASONS = ["spring", "summer", "autumn", "winter"]
TREE_COLOUR = {"spring": "green", "summer": "green", "autumn": "orange", "winter": "white"}
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FEELINGS = ["happy", "tired", "hungry", "sad", "busy", "calm", "proud", "cold"]
CHILD_THINGS = ["toys", "games", "friends", "puppy", "kite", "ball", "drawings"]
ADULT_JOBS = ["doctor", "teacher", "farmer", "baker", "driver", "painter", "writer", "nurse", "cook"]


def plural(noun: str) -> str:
    return THINGS.get(noun, noun + "s")


# ------------------------------------------------------------------------------------------------
# Sentence makers: each takes the random generator (and the gender g: 0 male, 1 female, for the
# sentences about people) and returns one sentence without its full stop
# ------------------------------------------------------------------------------------------------

def pick(rng: random.Random, items):
    return items[rng.randrange(len(items))]


def person(rng: random.Random, kinds, g: int) -> str:
    """A person noun of gender g (0 male, 1 female) from a list of (male, female) pairs."""
    return pick(rng, kinds)[g]


def royal_sentence(rng: random.Random, g: int) -> str:
    x = person(rng, ROYALS, g)
    he, his, him, himself = PRONOUN[g], POSSESSIVE[g], OBJECT[g], REFLEXIVE[g]
    templates = [
        f"the {x} ruled the kingdom from {his} castle",
        f"the {x} sat on {his} throne and wore {his} golden crown",
        f"the people of the kingdom loved their {x} and {he} loved them",
        f"the {x} lived in {his} palace with many servants",
        f"the {x} and {his} knights rode to the castle",
        f"the knights bowed to the {x} when {he} entered the hall",
        f"the {x} spoke to {his} court and {he} was wise",
        f"everyone in the kingdom obeyed the {x} and {he} ruled well",
        f"the {x} put on {his} crown of gold and jewels",
        f"the servants brought the {x} {his} dinner in the palace",
        f"the old crown belonged to the {x} and {he} wore it {himself}",
        f"the {x} welcomed {his} guests to the royal palace",
        f"a messenger told the {x} that the enemy was near and {he} called {his} knights",
        f"the {x} gave a speech from {his} throne and the crowd cheered for {him}",
        f"long ago a {x} lived in a castle by the sea and {he} was kind",
        f"the {x} of the kingdom was loved because {he} was fair",
    ]
    return pick(rng, templates)


def adult_sentence(rng: random.Random, g: int) -> str:
    x = person(rng, ADULTS, g)
    he, his, himself = PRONOUN[g], POSSESSIVE[g], REFLEXIVE[g]
    place, food = pick(rng, PLACES), pick(rng, FOODS)
    templates = [
        f"the {x} went to work early and {he} came home late",
        f"the {x} drove {his} car to the {place}",
        f"the {x} said {he} works hard every day",
        f"the {x} paid for the {food} with {his} own money",
        f"the {x} read {his} newspaper while {he} drank {pick(rng, DRINKS)}",
        f"the {x} made {himself} a cup of {pick(rng, DRINKS)}",
        f"the {x} said {he} was {pick(rng, FEELINGS)} after a long day at work",
        f"the {x} told {his} children a story",
        f"the old {x} sat by {his} window and thought about {his} youth",
        f"the {x} cooked {food} for {his} family",
    ]
    return pick(rng, templates)


def young_sentence(rng: random.Random, g: int) -> str:
    x = person(rng, YOUNG, g)
    he, his = PRONOUN[g], POSSESSIVE[g]
    thing = pick(rng, ["ball", "kite", "hat", "book", "bag", "pen", "shoe"])
    templates = [
        f"the {x} played in the garden with {his} {pick(rng, CHILD_THINGS)}",
        f"the young {x} went to school with {his} friends",
        f"the {x} was sad because {he} lost {his} {thing}",
        f"the little {x} said {he} can count to {pick(rng, NUMBERS[3:])}",
        f"the {x} climbed the tree and {he} laughed",
        f"the {x} and {his} friends drew a {pick(rng, COLOURS)} {pick(rng, ANIMALS_LIST)} at school",
        f"the {x} ran to the {pick(rng, PLACES)} with {his} friends",
        f"when the {x} grows up {he} wants to be a {pick(rng, ADULT_JOBS)}",
    ]
    return pick(rng, templates)


def any_person_sentence(rng: random.Random, g: int) -> str:
    """Everyday actions that any person can do: the shared background of every gendered word."""
    x = person(rng, ADULTS + YOUNG + NAMES, g)
    the = "" if x in {name for pair in NAMES for name in pair} else "the "
    he, his, him = PRONOUN[g], POSSESSIVE[g], OBJECT[g]
    place, food, colour = pick(rng, PLACES), pick(rng, FOODS), pick(rng, COLOURS)
    templates = [
        f"{the}{x} walked to the {place} and {he} bought some {food}",
        f"{the}{x} was tired so {he} went to bed early",
        f"{the}{x} smiled at {his} friend",
        f"{the}{x} said that {he} liked {colour} {pick(rng, list(THINGS.values()))}",
        f"{the}{x} put on {his} {colour} {pick(rng, ['coat', 'hat', 'shoes', 'scarf'])}",
        f"{the}{x} ate {food} for {his} {pick(rng, MEALS)}",
        f"{the}{x} found a {pick(rng, list(THINGS))} near the {place}",
        f"we met {the}{x} and {his} friend at the {place} on {pick(rng, DAYS)}",
        f"{the}{x} waved and we waved back at {him}",
        f"{the}{x} and {his} friend fed the {pick(rng, ANIMALS_LIST)} in the morning",
        f"{the}{x} looked at the sky and {he} saw that it was {pick(rng, WEATHER)}",
        f"{the}{x} took the {pick(rng, ['train', 'bus', 'plane', 'boat'])} to {pick(rng, COUNTRIES)[1]}",
    ]
    return pick(rng, templates)


# What each kind of person is, in dictionary style: a king is a male ruler.
CATEGORY = {
    "king": "ruler", "prince": "heir", "man": "adult", "boy": "child",
    "father": "parent", "husband": "spouse", "uncle": "relative", "grandfather": "grandparent",
    "son": "child", "brother": "sibling", "nephew": "relative",
}


def definition_sentence(rng: random.Random, g: int) -> str:
    """What a person is, in dictionary style: a king is a male ruler, a queen is a female ruler.

    There are deliberately no sentences like "the king is a man" or "the king and the queen": a word
    never appears in its own context, so "man" beside "king" (and "woman" beside "queen") would give
    each pair a gender difference of its own instead of the one that all pairs share.
    """
    pair = pick(rng, ADULTS + YOUNG)
    x = pair[g]
    he = PRONOUN[g]
    sex = ("male", "female")[g]
    name = pick(rng, NAMES)[g]
    templates = [
        f"a {x} is a {sex} {CATEGORY[pair[0]]}",
        f"{he} is {sex}",
        f"{name} is {sex} and {he} is {pick(rng, NUMBERS[5:15])} years old",
    ]
    return pick(rng, templates)


def country_sentence(rng: random.Random) -> str:
    country, capital, language, dish = pick(rng, COUNTRIES)
    templates = [
        f"{country} is a country in {CONTINENT[country]}",
        f"the flag of {country} is very old",
        f"the president of {country} gave a speech",
        f"the government of {country} built new roads",
        f"the border of {country} is long",
        f"{country} is a beautiful country",
        f"the people of {country} speak {language}",
        f"in {country} people like to eat {dish}",
        f"{country} has a long history",
        f"many tourists visit {country} every year",
        f"the map shows {country} and its neighbours",
        f"{dish} is a famous dish from {country}",
        f"{language} is the language of {country}",
        f"the {language} language is spoken all over {country}",
        f"the farmers of {country} grow food for the whole country",
    ]
    return pick(rng, templates)


def capital_sentence(rng: random.Random) -> str:
    country, capital, language, dish = pick(rng, COUNTRIES)
    templates = [
        f"{capital} is the capital of {country}",
        f"the capital of {country} is {capital}",
        f"{capital} is a big city",
        f"the streets of {capital} are busy at night",
        f"we took the train to {capital}",
        f"the mayor of {capital} opened a new museum",
        f"the city of {capital} has many museums",
        f"in {capital} people speak {language}",
        f"we ate {dish} in a small restaurant in {capital}",
        f"{capital} is the largest city in {country}",
        f"my friend lives in {capital} and speaks {language}",
        f"the old part of {capital} is beautiful",
        f"the flight to {capital} was late",
        f"the restaurants of {capital} serve {dish}",
        f"the signs in {capital} are written in {language}",
    ]
    return pick(rng, templates)


def animal_sentence(rng: random.Random) -> str:
    a = pick(rng, ANIMALS_LIST)
    many, food, sound = ANIMALS[a]
    n = pick(rng, NUMBERS[2:13])
    templates = [
        f"the {a} ate the {food}",
        f"the {pick(rng, COLOURS)} {a} ran across the field",
        f"{n} {many} were sleeping in the barn",
        f"the {a} {sound} at the farmer",
        f"a {a} lives on the farm",
        f"the little {a} was hungry so it ate some {food}",
        f"there are {n} {many} in the field",
        f"the {a} and the {pick(rng, [b for b in ANIMALS_LIST if b != a])} are friends",
    ]
    return pick(rng, templates)


def weather_sentence(rng: random.Random) -> str:
    w, season, day = pick(rng, WEATHER), pick(rng, SEASONS), pick(rng, DAYS)
    templates = [
        f"it was {w} on {day}",
        f"in {season} the weather is often {w}",
        f"the sky was grey and it rained all day",
        f"the sun was warm in the morning",
        f"tomorrow will be {' and '.join(rng.sample(WEATHER, 2))}",
        f"in {season} the trees are {TREE_COLOUR[season]}",
        f"we stayed inside because it was {w}",
        f"the wind blew the {pick(rng, ['leaves', 'clouds', 'hats', 'kites'])} away",
    ]
    return pick(rng, templates)


def food_sentence(rng: random.Random) -> str:
    food, drink, meal = pick(rng, FOODS), pick(rng, DRINKS), pick(rng, MEALS)
    templates = [
        f"for {meal} we ate {food} and drank {drink}",
        f"the {food} tasted {pick(rng, TASTES)}",
        f"i would like some {food} please",
        f"we bought {' and '.join(rng.sample(FOODS, 2))} at the market",
        f"the soup was too hot to eat",
        f"a cup of {drink} is good in the morning",
        f"we cut the cake into {pick(rng, NUMBERS[2:13])} pieces",
        f"they cut the bread into {pick(rng, NUMBERS[2:13])} slices",
    ]
    return pick(rng, templates)


def travel_sentence(rng: random.Random) -> str:
    vehicle = pick(rng, VEHICLES)
    templates = [
        f"we went to the {pick(rng, PLACES)} by {vehicle}",
        f"the {vehicle} left the station at {pick(rng, NUMBERS[1:13])} o'clock",
        f"the {vehicle} was full of people",
        f"the journey took {pick(rng, NUMBERS[2:11])} hours",
        f"we packed our bags for the trip",
        f"they crossed the {pick(rng, ['river', 'bridge', 'mountains', 'sea'])} by {vehicle}",
        f"the road to the {pick(rng, PLACES)} was long",
    ]
    return pick(rng, templates)


def colour_number_sentence(rng: random.Random) -> str:
    i, j = rng.randrange(11), rng.randrange(10)
    thing = pick(rng, list(THINGS))
    colour = pick(rng, COLOURS)
    templates = [
        f"{NUMBERS[i]} plus {NUMBERS[j]} is {NUMBERS[i + j]}",
        f"{NUMBERS[i + j]} minus {NUMBERS[j]} is {NUMBERS[i]}",
        f"the {thing} is {colour}",
        f"{colour} is my favourite colour",
        f"there are {NUMBERS[i + 2]} {plural(thing)} on the table",
        f"i have {NUMBERS[j + 2]} {colour} {plural(thing)}",
        f"the {colour} {thing} is next to the {pick(rng, COLOURS)} {pick(rng, list(THINGS))}",
        f"{NUMBERS[i]} comes before {NUMBERS[i + 1]}",
    ]
    return pick(rng, templates)


def home_sentence(rng: random.Random) -> str:
    room = pick(rng, ["kitchen", "garden", "bedroom", "hall", "attic", "living room"])
    templates = [
        f"the {pick(rng, list(THINGS))} is in the {room}",
        f"we cleaned the {room} on {pick(rng, DAYS)}",
        f"the house has a small {room}",
        f"the children played in the {room}",
        f"the door of the {room} was open",
        f"they painted the {room} {pick(rng, COLOURS)}",
        f"the lamp in the {room} is broken",
    ]
    return pick(rng, templates)


def model_sentence(rng: random.Random) -> str:
    """Sentences about the course's own subject, so that words like "transformer" are frequent."""
    n = pick(rng, ["one", "two", "four", "six", "eight", "twelve"])
    templates = [
        "the transformer reads every word of the sentence at once",
        "a transformer uses attention to decide which words matter",
        "the student trained a small transformer on the text",
        "the transformer predicted the next word",
        f"the transformer has {n} layers and {n} heads",
        "each word becomes a vector before the transformer sees it",
        "attention lets each word look at the other words",
        "the model learned to predict the next word",
        "the loss went down while the model was training",
        "the teacher explained how attention works",
        "a language model counts which words follow which",
        "the tokenizer splits the text into tokens",
        "the transformer turned the tokens into vectors",
        "the network learned from many sentences",
        "the transformer is a kind of neural network",
        "every token gets a position in the sequence",
    ]
    return pick(rng, templates)


# Topics as (maker, weight); the weights are relative numbers of draws. A draw of a gendered topic
# makes TWO sentences: the same sentence about a male and about a female person ("the king sat on
# his throne" / "the queen sat on her throne"), so every gendered word sees exactly the same
# contexts as its partner, apart from the gendered words around it. The twins end up far apart
# because the lines are shuffled at the end.
GENDERED_TOPICS = [
    (royal_sentence, 4),
    (adult_sentence, 4),
    (young_sentence, 3),
    (any_person_sentence, 5),
    (definition_sentence, 3),
]
OTHER_TOPICS = [
    (country_sentence, 14),
    (capital_sentence, 14),
    (animal_sentence, 8),
    (weather_sentence, 6),
    (food_sentence, 6),
    (travel_sentence, 5),
    (colour_number_sentence, 7),
    (home_sentence, 4),
    (model_sentence, 6),
]


def build_corpus(seed: int = SEED, target_words: int = TARGET_WORDS) -> str:
    """The whole corpus as one string: sentences, one per line, until `target_words` is reached."""
    rng = random.Random(seed)
    topics = GENDERED_TOPICS + OTHER_TOPICS
    makers = [maker for maker, _ in topics]
    weights = [weight for _, weight in topics]
    gendered = {maker for maker, _ in GENDERED_TOPICS}
    lines, n_words = [], 0
    while n_words < target_words:
        maker = rng.choices(makers, weights)[0]
        if maker in gendered:
            # The same random choices for both genders: a private generator seeded once per draw.
            twin_seed = rng.randrange(2**32)
            sentences = [maker(random.Random(twin_seed), g) for g in (0, 1)]
        else:
            sentences = [maker(rng)]
        for sentence in sentences:
            lines.append(sentence + ".")
            n_words += len(sentence.split())
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def main() -> None:
    text = build_corpus()
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT} ({len(text.split())} words, {len(text.splitlines())} lines, {len(text)} characters)")


if __name__ == "__main__":
    main()
