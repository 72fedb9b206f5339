package encyclopedia

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/internal/pyjson"
)

// DataSource is the data_source of every question.
const DataSource = "encyclopedia"

// Config sizes an encyclopedia: how many entities of each kind it
// describes (one passage each) and the seed of its random source.
type Config struct {
	Seed                                            uint64
	People, Towns, Rivers, Mountains, Guilds, Works int
	// TestPercent is the share of question subjects (people, towns,
	// rivers, ...) whose questions go to the test split; default 20.
	TestPercent int
}

// DefaultConfig is the shipped encyclopedia's: 300 passages.
func DefaultConfig() Config {
	return Config{Seed: 1, People: 100, Towns: 50, Rivers: 25, Mountains: 25, Guilds: 25, Works: 75}
}

// Scaled returns a configuration of about n passages (at least 12), in
// the default's proportions, for measurements on larger corpora.
func Scaled(n int, seed uint64) Config {
	n = max(n, 12)
	part := func(k int) int { return max(1, n*k/300) }
	c := Config{Seed: seed, People: part(100), Towns: part(50), Rivers: part(25), Mountains: part(25), Guilds: part(25)}
	c.Works = max(1, n-c.People-c.Towns-c.Rivers-c.Mountains-c.Guilds)
	return c
}

// Passage is one document of the corpus.
type Passage struct {
	// ID is the passage's id in the corpus, its row number in decimal.
	ID string
	// Title is the entity's name; Text the passage about it.
	Title, Text string
}

// Contents returns the passage in Search-R1's layout: the title in double
// quotes, a newline, the text.
func (p Passage) Contents() string { return `"` + p.Title + `"` + "\n" + p.Text }

// Question is a question the corpus answers.
type Question struct {
	// Split is "train" or "test": the test split's questions are about
	// subjects no train question names.
	Split string
	// Text is the question. It names its subject as the subject's
	// passage is titled, so that searching for the name finds it.
	Text string
	// Answer is written verbatim in the last passage of Evidence.
	Answer string
	// Kind names the question's template ("person_birthplace", ...).
	Kind string
	// Hops is the number of passages to read: 1, or 2 when the first
	// passage names the entity whose passage holds the answer.
	Hops int
	// Evidence lists the ids of the passages to read, in order.
	Evidence []string
}

// Encyclopedia is a corpus of passages about fictional entities and
// questions answered by them.
type Encyclopedia struct {
	Passages  []Passage
	Questions []Question
}

// Entity kinds, and the words the passages are made of.
var (
	onsets      = []string{"b", "br", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "t", "th", "v", "z", "c", "j", "w", "st", "tr"}
	vowels      = []string{"a", "e", "i", "o", "u", "a", "e", "i", "o", "ae", "ai", "ei", "ou", "ia"}
	codas       = []string{"", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "x", "ll", "st"}
	professions = []string{"cartographer", "glassblower", "astronomer", "botanist", "clockmaker", "composer", "engineer", "painter", "poet", "physician", "shipwright", "weaver"}
	workKinds   = map[string][]string{
		"cartographer": {"atlas", "chart"}, "glassblower": {"window", "chandelier"}, "astronomer": {"star catalogue", "treatise"},
		"botanist": {"herbarium", "treatise"}, "clockmaker": {"clock", "orrery"}, "composer": {"symphony", "opera"},
		"engineer": {"bridge", "canal"}, "painter": {"painting", "fresco"}, "poet": {"poem", "epic"},
		"physician": {"treatise", "pharmacopoeia"}, "shipwright": {"ship", "galley"}, "weaver": {"tapestry", "carpet"},
	}
	adjectives = []string{"Amber", "Ashen", "Brass", "Crimson", "Distant", "Emerald", "Fallow", "Gilded", "Hollow", "Ivory", "Jade", "Lantern", "Midnight", "Northern", "Opal", "Pale", "Quiet", "Russet", "Silver", "Tidal", "Umber", "Velvet", "Winter", "Yellow"}
	nouns      = []string{"Anchor", "Bell", "Compass", "Crown", "Dial", "Falcon", "Garden", "Harbour", "Heron", "Key", "Lamp", "Loom", "Meridian", "Orchard", "Pilgrim", "Quill", "Raven", "Sextant", "Spire", "Tide", "Vessel", "Weir", "Willow", "Wren"}
	guildKinds = []string{"Society", "Guild", "Academy", "Company", "Observatory", "Conservatory", "League", "Institute"}
	purposes   = map[string]string{
		"Society": "meets to read papers on natural philosophy", "Guild": "trains apprentices and sets the standards of the trade",
		"Academy": "teaches drawing, music and mathematics", "Company": "trades in timber, salt and glass",
		"Observatory": "records the positions of comets", "Conservatory": "keeps a collection of rare seeds",
		"League": "maintains the mountain roads and their shelters", "Institute": "publishes an annual almanac",
	}
	seas      = []string{"Pallid Sea", "Sea of Ivel", "Gulf of Maren", "Umber Sea", "Sea of Corrath", "Strait of Oseline", "Bay of Thessary", "Grey Sound"}
	ranges    = []string{"Harrowspine", "Velden Crags", "Ostmark Heights", "Sunder Peaks", "Caldris Range", "Mireth Hills"}
	provinces = []string{"Averholm", "Brenmark", "Castavel", "Dunmere", "Estrovia", "Fellgrave", "Gorvane", "Hollin", "Istermoor", "Jessary"}
	seasons   = []string{"spring", "summer", "autumn", "winter"}
)

// generator holds the state of one Generate.
type generator struct {
	rng   *rand.PCG
	names map[string]bool
}

// intn returns a number in [0, n) from the PCG's raw output (modulo
// reduction: its bias, below n/2⁶⁴, does not matter here, and unlike
// rand.Rand's methods it is fixed by this code, not by the Go release).
func (g *generator) intn(n int) int { return int(g.rng.Uint64() % uint64(n)) }

func pick[T any](g *generator, s []T) T { return s[g.intn(len(s))] }

// word returns a new capitalized name of 2 syllables, or 2 or 3 when
// long, and a final consonant or none, unused so far.
func (g *generator) word(long bool) string {
	for {
		n := 2
		if long {
			n += g.intn(2)
		}
		var b strings.Builder
		for range n {
			b.WriteString(pick(g, onsets))
			b.WriteString(pick(g, vowels))
		}
		b.WriteString(pick(g, codas))
		w := b.String()
		w = strings.ToUpper(w[:1]) + w[1:]
		if len(w) >= 4 && !g.names[w] {
			g.names[w] = true
			return w
		}
	}
}

type person struct {
	name, profession, pronoun, possessive string
	born                                  int
	town                                  int
}

type town struct {
	name, province, season, festival string
	river, founded, population       int
}

type river struct {
	name, sea string
	length    int
	mountain  int
}

type mountain struct {
	name, rangeName string
	height, climbed int
	climber         int
}

type guild struct {
	name, kind string
	founded    int
	founder    int
	town       int
}

type work struct {
	name, kind string
	year       int
	creator    int
	town       int
}

// Generate builds the encyclopedia cfg describes. The same Config gives
// the same passages and questions, byte for byte.
func Generate(cfg Config) (*Encyclopedia, error) {
	if cfg.People < 1 || cfg.Towns < 1 || cfg.Rivers < 1 || cfg.Mountains < 1 || cfg.Guilds < 0 || cfg.Works < 0 {
		return nil, fmt.Errorf("encyclopedia: Config %+v: want at least one person, town, river and mountain", cfg)
	}
	if cfg.TestPercent == 0 {
		cfg.TestPercent = 20
	}
	if cfg.TestPercent < 0 || cfg.TestPercent > 100 {
		return nil, fmt.Errorf("encyclopedia: Config.TestPercent = %d, want 0..100", cfg.TestPercent)
	}
	g := &generator{rng: rand.NewPCG(cfg.Seed, 0x656e6379636c6f70), names: map[string]bool{}}

	mountains := make([]mountain, cfg.Mountains)
	rivers := make([]river, cfg.Rivers)
	towns := make([]town, cfg.Towns)
	people := make([]person, cfg.People)
	guilds := make([]guild, cfg.Guilds)
	works := make([]work, cfg.Works)
	for i := range mountains {
		mountains[i] = mountain{name: "Mount " + g.word(false), rangeName: pick(g, ranges), height: 1200 + g.intn(5300)}
	}
	for i := range rivers {
		rivers[i] = river{name: g.word(false) + " River", sea: pick(g, seas), length: 40 + g.intn(1900), mountain: g.intn(len(mountains))}
	}
	for i := range towns {
		towns[i] = town{name: g.word(false), province: pick(g, provinces), river: g.intn(len(rivers)),
			founded: 900 + g.intn(700), population: 800 + g.intn(90000), season: pick(g, seasons)}
		towns[i].festival = g.word(false)
	}
	for i := range people {
		p := person{name: g.word(false) + " " + g.word(true), profession: pick(g, professions), born: 1600 + g.intn(280), town: g.intn(len(towns))}
		if g.intn(2) == 0 {
			p.pronoun, p.possessive = "She", "Her"
		} else {
			p.pronoun, p.possessive = "He", "His"
		}
		people[i] = p
	}
	for i := range mountains {
		mountains[i].climber = g.intn(len(people))
		mountains[i].climbed = people[mountains[i].climber].born + 20 + g.intn(30)
	}
	for i := range guilds {
		f := g.intn(len(people))
		kind := pick(g, guildKinds)
		guilds[i] = guild{name: g.word(false) + " " + kind, kind: kind, founder: f, founded: people[f].born + 25 + g.intn(30), town: g.intn(len(towns))}
	}
	titles := map[string]bool{}
	for i := range works {
		c := g.intn(len(people))
		var name string
		for {
			name = "The " + pick(g, adjectives) + " " + pick(g, nouns)
			if len(works) > 200 || titles[name] {
				name += " of " + g.word(false)
			}
			if !titles[name] {
				break
			}
		}
		titles[name] = true
		works[i] = work{name: name, kind: pick(g, workKinds[people[c].profession]), creator: c, year: people[c].born + 22 + g.intn(40), town: g.intn(len(towns))}
	}

	// Passages, in a shuffled order; ids are the row numbers.
	type entity struct {
		kind string
		i    int
	}
	var order []entity
	for _, k := range []struct {
		kind string
		n    int
	}{{"mountain", len(mountains)}, {"river", len(rivers)}, {"town", len(towns)}, {"person", len(people)}, {"guild", len(guilds)}, {"work", len(works)}} {
		for i := range k.n {
			order = append(order, entity{k.kind, i})
		}
	}
	for i := len(order) - 1; i > 0; i-- {
		j := g.intn(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	id := map[entity]string{}
	for n, e := range order {
		id[e] = strconv.Itoa(n)
	}
	// guildsOf and worksOf list what each person founded and made.
	guildsOf := make([][]int, len(people))
	for i, gu := range guilds {
		guildsOf[gu.founder] = append(guildsOf[gu.founder], i)
	}
	worksOf := make([][]int, len(people))
	for i, w := range works {
		worksOf[w.creator] = append(worksOf[w.creator], i)
	}
	riversOf := make([][]int, len(mountains))
	for i, r := range rivers {
		riversOf[r.mountain] = append(riversOf[r.mountain], i)
	}

	enc := &Encyclopedia{Passages: make([]Passage, len(order))}
	for n, e := range order {
		var title, text string
		switch e.kind {
		case "mountain":
			m := mountains[e.i]
			title = m.name
			text = fmt.Sprintf("%s is a mountain of the %s. Its summit stands %d metres above sea level. It was first climbed in %d by %s.",
				m.name, m.rangeName, m.height, m.climbed, people[m.climber].name)
			for _, r := range riversOf[e.i] {
				text += fmt.Sprintf(" The %s rises on its slopes.", rivers[r].name)
			}
		case "river":
			r := rivers[e.i]
			title = r.name
			if g.intn(2) == 0 {
				text = fmt.Sprintf("The %s is a river %d kilometres long. It rises on %s and flows into the %s.", r.name, r.length, mountains[r.mountain].name, r.sea)
			} else {
				text = fmt.Sprintf("The %s rises on %s and flows into the %s after a course of %d kilometres.", r.name, mountains[r.mountain].name, r.sea, r.length)
			}
		case "town":
			t := towns[e.i]
			title = t.name
			text = fmt.Sprintf("%s is a town in the province of %s. It lies on the %s and was founded in %d. %s has a population of %d. Every %s it holds the %s festival.",
				t.name, t.province, rivers[t.river].name, t.founded, t.name, t.population, t.season, t.festival)
		case "person":
			p := people[e.i]
			title = p.name
			if g.intn(2) == 0 {
				text = fmt.Sprintf("%s was %s %s, born in %s in %d.", p.name, article(p.profession), p.profession, towns[p.town].name, p.born)
			} else {
				text = fmt.Sprintf("%s was born in %d in %s and became %s %s.", p.name, p.born, towns[p.town].name, article(p.profession), p.profession)
			}
			for _, w := range worksOf[e.i] {
				text += fmt.Sprintf(" %s %s %s was completed in %d.", p.possessive, works[w].kind, works[w].name, works[w].year)
			}
			for _, gu := range guildsOf[e.i] {
				text += fmt.Sprintf(" In %d %s founded the %s.", guilds[gu].founded, strings.ToLower(p.pronoun), guilds[gu].name)
			}
		case "guild":
			gu := guilds[e.i]
			title = gu.name
			text = fmt.Sprintf("The %s was founded in %d by %s. It is based in %s and %s.",
				gu.name, gu.founded, people[gu.founder].name, towns[gu.town].name, purposes[gu.kind])
		case "work":
			w := works[e.i]
			title = w.name
			text = fmt.Sprintf("%s is %s %s by %s, completed in %d. It is kept in %s.", w.name, article(w.kind), w.kind, people[w.creator].name, w.year, towns[w.town].name)
		}
		enc.Passages[n] = Passage{ID: strconv.Itoa(n), Title: title, Text: text}
	}

	// Questions, grouped by subject; a subject's questions all go to one
	// split.
	split := func() string {
		if g.intn(100) < cfg.TestPercent {
			return "test"
		}
		return "train"
	}
	q := func(s, text, answer, kind string, evidence ...string) {
		hops := len(evidence)
		enc.Questions = append(enc.Questions, Question{Split: s, Text: text, Answer: answer, Kind: kind, Hops: hops, Evidence: evidence})
	}
	for i, p := range people {
		s, pid, tid := split(), id[entity{"person", i}], id[entity{"town", p.town}]
		t := towns[p.town]
		q(s, "In which town was "+p.name+" born?", t.name, "person_birthplace", pid)
		q(s, "In what year was "+p.name+" born?", strconv.Itoa(p.born), "person_birth_year", pid)
		q(s, "What was the profession of "+p.name+"?", p.profession, "person_profession", pid)
		q(s, "Which river flows through the town where "+p.name+" was born?", rivers[t.river].name, "person_birthplace_river", pid, tid)
		q(s, "In which province was "+p.name+" born?", t.province, "person_birthplace_province", pid, tid)
	}
	for i, t := range towns {
		s, tid := split(), id[entity{"town", i}]
		q(s, "Which river flows through "+t.name+"?", rivers[t.river].name, "town_river", tid)
		q(s, "In which province is "+t.name+"?", t.province, "town_province", tid)
		q(s, "In what year was "+t.name+" founded?", strconv.Itoa(t.founded), "town_founded", tid)
		q(s, "Into which body of water does the river of "+t.name+" flow?", rivers[t.river].sea, "town_river_mouth", tid, id[entity{"river", t.river}])
	}
	for i, r := range rivers {
		s, rid := split(), id[entity{"river", i}]
		q(s, "How long is the "+r.name+" in kilometres?", strconv.Itoa(r.length), "river_length", rid)
		q(s, "Into which body of water does the "+r.name+" flow?", r.sea, "river_mouth", rid)
		q(s, "How high is the mountain where the "+r.name+" rises, in metres?", strconv.Itoa(mountains[r.mountain].height), "river_source_height", rid, id[entity{"mountain", r.mountain}])
	}
	for i, m := range mountains {
		s, mid := split(), id[entity{"mountain", i}]
		q(s, "How high is "+m.name+" in metres?", strconv.Itoa(m.height), "mountain_height", mid)
		q(s, "Who first climbed "+m.name+"?", people[m.climber].name, "mountain_climber", mid)
		q(s, "In which town was the first climber of "+m.name+" born?", towns[people[m.climber].town].name, "mountain_climber_birthplace", mid, id[entity{"person", m.climber}])
	}
	for i, gu := range guilds {
		s, gid := split(), id[entity{"guild", i}]
		q(s, "Who founded the "+gu.name+"?", people[gu.founder].name, "guild_founder", gid)
		q(s, "In which town is the "+gu.name+" based?", towns[gu.town].name, "guild_town", gid)
		q(s, "What was the profession of the founder of the "+gu.name+"?", people[gu.founder].profession, "guild_founder_profession", gid, id[entity{"person", gu.founder}])
	}
	for i, w := range works {
		s, wid := split(), id[entity{"work", i}]
		q(s, "Who made "+w.name+"?", people[w.creator].name, "work_creator", wid)
		q(s, "In what year was "+w.name+" completed?", strconv.Itoa(w.year), "work_year", wid)
		q(s, "In which town was the maker of "+w.name+" born?", towns[people[w.creator].town].name, "work_creator_birthplace", wid, id[entity{"person", w.creator}])
	}
	return enc, nil
}

// article returns "an" before a vowel, "a" otherwise.
func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// WriteCorpus writes the passages as Search-R1's corpus, JSON Lines of
// {"id": ..., "contents": ...}, as Python's json.dumps writes them.
func (e *Encyclopedia) WriteCorpus(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, p := range e.Passages {
		bw.WriteString(`{"id": `)
		bw.WriteString(pyjson.Quote(p.ID))
		bw.WriteString(`, "contents": `)
		bw.WriteString(pyjson.Quote(p.Contents()))
		bw.WriteString("}\n")
	}
	return bw.Flush()
}

// WriteQuestions writes the questions of split ("train" or "test"; "" for
// all) as a verl prompt set in JSON Lines, as Search-R1's data scripts
// lay it out (scripts/data_process/nq_search.py): data_source, prompt
// (the question as the user's message, with no instruction: the program
// adds its own), ability "fact-reasoning", reward_model {"style": "rule",
// "ground_truth": {"target": [answer]}}, and extra_info {split, index,
// kind, hops, evidence}: index counts the split's rows, evidence lists
// the passage ids to read.
func (e *Encyclopedia) WriteQuestions(w io.Writer, split string) error {
	if split != "" && split != "train" && split != "test" {
		return errors.New(`encyclopedia: split must be "train", "test" or ""`)
	}
	bw := bufio.NewWriter(w)
	index := 0
	for _, q := range e.Questions {
		if split != "" && q.Split != split {
			continue
		}
		ev := make([]string, len(q.Evidence))
		for i, id := range q.Evidence {
			ev[i] = pyjson.Quote(id)
		}
		fmt.Fprintf(bw, `{"data_source": %s, "prompt": [{"role": "user", "content": %s}], "ability": "fact-reasoning", `+
			`"reward_model": {"style": "rule", "ground_truth": {"target": [%s]}}, `+
			`"extra_info": {"split": %s, "index": %d, "kind": %s, "hops": %d, "evidence": [%s]}}`+"\n",
			pyjson.Quote(DataSource), pyjson.Quote(q.Text), pyjson.Quote(q.Answer),
			pyjson.Quote(q.Split), index, pyjson.Quote(q.Kind), q.Hops, strings.Join(ev, ", "))
		index++
	}
	return bw.Flush()
}

// Split returns the questions of split.
func (e *Encyclopedia) Split(split string) []Question {
	return slices.DeleteFunc(slices.Clone(e.Questions), func(q Question) bool { return q.Split != split })
}
