//! Business numbers: gap-free numbers with tickets, numbers that restart
//! every day, month or year by the store's clock, and formatted numbers
//! (`INV-20261123-0042`).
//!
//! A *numbered* sequence is created with [`create`] and a [`Numbering`]; its
//! settings live in the store beside it, so every process counts and formats
//! alike. Its numbers come from a [`Numbers`] handle, one store round trip
//! per call (never from a cached block: a block reserved before midnight
//! must not hand out yesterday's numbers after it, and a gap-free number
//! must be recorded as taken before it leaves the store):
//!
//! - [`Numbers::next_n`] (a sequence that is not gap-free): `n` numbers of
//!   the current period. Gaps are possible as for any sequence (a caller
//!   that loses its numbers); duplicates never.
//! - [`Numbers::take`], then [`Numbers::commit`] or [`Numbers::release`] (a
//!   gap-free sequence): see [`crate::store::NumberStore`]. *Gap-free* means:
//!   within a period, the committed numbers are `start..start+k` with no
//!   hole once every ticket taken was committed, released (its number is
//!   taken again, first) or expired (likewise). A number released or
//!   expired after its period ended stays a hole: numbers are taken only in
//!   the current period.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> keysmith_core::Result<()> {
//! use keysmith_core::numbers::{self, Numbering, Numbers, Period};
//! use keysmith_core::store::{self, SequenceSpec};
//!
//! let store = store::open("memory://").await?;
//! let invoices = Numbering {
//!     gapless: true,
//!     period: Some(Period::Year),
//!     template: Some("INV-{period}-{n:04}".into()),
//!     ..Numbering::default()
//! };
//! numbers::create(&*store, &SequenceSpec::new("invoices"), &invoices).await?;
//! let h = Numbers::open(store, "invoices").await?;
//! let t = h.take(numbers::DEFAULT_TICKET_TTL).await?;
//! assert!(t.text.ends_with("-0001"));
//! h.commit(&t.ticket.to_string()).await?;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::ids::Clock;
use crate::sequence::SequenceInfo;
use crate::store::{SequenceSpec, Store, TakenNumber, TicketTake, check_ttl};
use crate::{Error, Result, validate_name};

pub use crate::numbering::{
    Alphabet, BitReversal, BitReversed, DEFAULT_PERIOD_TEMPLATE, Encoding, FEISTEL_ROUNDS, Feistel,
    KEY_SLOTS, KeySecret, MAX_PADDING, MAX_PREFIX_BYTES, MAX_TEMPLATE_BYTES, MIN_OPAQUE_MAX,
    Number, Opaque, OpaqueKey, OpaqueMap, SkipRange, Template, VALUE_BITS,
};
pub use crate::store::{DEFAULT_TICKET_TTL, MAX_TICKET_TTL, Numbering, Period};

/// Creates a numbered sequence: its row and its numbering in one write.
/// Both are checked first, so a bad template, period or bound creates
/// nothing. Over a dropped name every period's numbers start above every
/// number the dropped sequence handed out, and a bit-reversed sequence
/// continues its counter (see [`crate::store::Tombstone`]), unless
/// `spec.start_below_dropped` is set.
///
/// An opaque sequence ([`Numbering::opaque`]) takes `spec.max` as the
/// largest value it hands out; its counter runs to
/// [`Opaque::counter_max`] (a sixteenth of that: see [`Opaque`]), and its
/// first key is made here from the operating system's random generator.
/// Over a dropped name it is refused unless `spec.start_below_dropped` (its
/// values spread over the whole range, so it cannot continue above the
/// dropped ones). An encoded sequence ([`Numbering::encoding`]) gets the
/// width of its largest value.
///
/// # Errors
/// [`Error::InvalidName`], [`Error::InvalidArgument`] (bounds, template, a
/// negative start with an encoding or opaque values, a max below
/// [`crate::numbering::MIN_OPAQUE_MAX`] for opaque values),
/// [`Error::AlreadyExists`]; [`Error::Unavailable`] when the operating
/// system gives no random bytes for a key.
pub async fn create(
    store: &dyn Store,
    spec: &SequenceSpec,
    numbering: &Numbering,
) -> Result<SequenceInfo> {
    spec.validate()?;
    numbering.validate()?;
    let (spec, numbering) = &prepare(spec, numbering)?;
    if numbering.bit_reversed.is_some() && spec.start < 1 {
        return Err(Error::invalid(format!(
            "a bit-reversed sequence starts at 1 or above (counter 0 would be value 0), got start {}",
            spec.start
        )));
    }
    // A residue class is handed out in blocks, a leader-ordered sequence by
    // its leader: the sequence module keeps them.
    if numbering.is_leader() {
        return crate::sequence::create_leader(store, spec).await;
    }
    if let Some(r) = numbering.residue {
        return crate::sequence::create_in_class(store, spec, r).await;
    }
    let row = store.create_numbered(spec, numbering).await?;
    Ok(SequenceInfo::created(row, None, spec.start))
}

/// The spec and numbering as the store receives them: an opaque
/// sequence's counter bound and first key, an encoding's width.
fn prepare(spec: &SequenceSpec, numbering: &Numbering) -> Result<(SequenceSpec, Numbering)> {
    let mut spec = spec.clone();
    let mut numbering = numbering.clone();
    if (numbering.opaque.is_some() || numbering.encoding.is_some()) && spec.start < 0 {
        return Err(Error::invalid(format!(
            "an opaque or encoded sequence starts at 0 or above, got start {}",
            spec.start
        )));
    }
    // The largest value handed out: what an encoding's width must hold.
    let mut top = if numbering.bit_reversed.is_some() {
        i64::MAX
    } else {
        spec.max
    };
    if let Some(o) = &mut numbering.opaque {
        let counter_max = Opaque::counter_max(spec.max)?;
        if spec.start > counter_max {
            return Err(Error::invalid(format!(
                "an opaque sequence with max {} counts from start to {counter_max} (a {KEY_SLOTS}th of its range: one part per key), so start {} leaves nothing; give a smaller start or a larger max",
                spec.max, spec.start
            )));
        }
        *o = Opaque {
            value_max: spec.max,
            keys: vec![OpaqueKey::random(0, spec.start)?],
        };
        top = OpaqueMap::new(o)?.value_max();
        spec.max = counter_max;
    }
    if let Some(e) = &mut numbering.encoding {
        *e = e.clone().with_max(top);
    }
    Ok((spec, numbering))
}

/// The numbering of a sequence, without its secrets
/// ([`Numbering::public`]): `None` for an ordinary one. What the front ends
/// show.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] (with similar names) when
/// there is no such sequence.
pub async fn numbering(store: &dyn Store, name: &str) -> Result<Option<Numbering>> {
    Ok(stored_numbering(store, name).await?.map(|n| n.public()))
}

/// Rotates the key of opaque sequence `name`: a new key, from the
/// operating system's random generator, maps every counter reserved from now
/// on into its own slot of the value range (see [`Opaque`]); values handed
/// out before keep decoding with their old key. One counter is taken to
/// mark where the new key starts (a gap of one). Handles opened before keep
/// the old key until they are opened again: their values stay in the old
/// key's slot, so no value repeats either way. Answers the settings
/// without secrets.
///
/// # Errors
/// [`Error::WrongKind`] for a sequence that is not opaque;
/// [`Error::InvalidArgument`] when all [`KEY_SLOTS`] keys are used;
/// [`Error::Contention`] when the settings changed meanwhile (another
/// rotation): nothing changed, run it again; [`Error::NotFound`],
/// [`Error::Unavailable`].
pub async fn rotate_key(store: &dyn Store, name: &str) -> Result<Numbering> {
    let not_opaque = || {
        Error::WrongKind(format!(
            "sequence {name:?} is not opaque: only a sequence created with --opaque has a key to rotate"
        ))
    };
    let old = stored_numbering(store, name)
        .await?
        .ok_or_else(not_opaque)?;
    let o = old.opaque.as_ref().ok_or_else(not_opaque)?;
    if o.keys.len() as i64 >= KEY_SLOTS {
        return Err(o.rotated(0).expect_err("all slots used"));
    }
    let marker = store.reserve_numbers(name, 0, 1).await?;
    let new = Numbering {
        opaque: Some(o.rotated(marker.end)?),
        ..old.clone()
    };
    if !store.replace_numbering(name, &old, &new).await? {
        return Err(Error::Contention {
            name: name.to_owned(),
            attempts: 1,
        });
    }
    Ok(new.public())
}

/// The numbering as the store keeps it, secrets included: never shown.
async fn stored_numbering(store: &dyn Store, name: &str) -> Result<Option<Numbering>> {
    validate_name(name)?;
    match store.read_numbering(name).await? {
        Some(n) => Ok(Some(n)),
        None => crate::sequence::describe(store, name).await.map(|_| None),
    }
}

/// What [`Numbers::decode`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Decoded {
    /// The value as an integer (before any encoding).
    pub value: i64,
    /// The sequence's plain counter it was made from (the value itself for
    /// a sequence that is neither opaque nor bit-reversed).
    pub counter: i64,
}

/// A ticket: what a gap-free number's holder quotes to commit or release
/// it. Written `PERIOD-VALUE-TOKEN` (period `0` without one), the token 32
/// random hex digits (128 bits), so no one commits another's number by
/// guessing; a ticket of a name that was dropped and created again carries
/// the life it was taken in: `PERIOD-VALUE-TOKEN-LIFE` (see
/// [`SequenceRow::incarnation`](crate::store::SequenceRow::incarnation)), so
/// quoting it in a later life is refused as [`Error::Dropped`], not only as
/// an unknown ticket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ticket {
    /// The period key of the number (0 without a period).
    pub period: i64,
    /// The number.
    pub value: i64,
    token: String,
    /// The life of the name it was taken in (1: the first; 0: unknown).
    life: u64,
}

impl Ticket {
    fn new(taken: TakenNumber, token: String, life: u64) -> Ticket {
        Ticket {
            period: taken.period,
            value: taken.value,
            token,
            life,
        }
    }

    /// The random part.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The life of the name the ticket was taken in (1 for a name never
    /// dropped; 0 when the store did not record lives).
    pub fn life(&self) -> u64 {
        self.life
    }
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.period, self.value, self.token)?;
        if self.life > 1 {
            write!(f, "-{}", self.life)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Ticket {
    type Err = Error;

    /// `PERIOD-VALUE-TOKEN` or `PERIOD-VALUE-TOKEN-LIFE` as [`Ticket`]
    /// writes it.
    fn from_str(s: &str) -> Result<Ticket> {
        let bad = || {
            Error::invalid(format!(
                "{:?} is not a ticket keysmith handed out (PERIOD-VALUE-TOKEN, as ticket take printed it); quote the ticket exactly",
                s.chars().take(80).collect::<String>()
            ))
        };
        let mut it = s.split('-');
        let (Some(p), Some(v), Some(t), l, None) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return Err(bad());
        };
        let num = |x: &str| {
            (!x.is_empty() && x.len() <= 19 && x.bytes().all(|b| b.is_ascii_digit()))
                .then(|| x.parse::<i64>().ok())
                .flatten()
        };
        let (Some(period), Some(value)) = (num(p), num(v)) else {
            return Err(bad());
        };
        if t.len() != 32 || !t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        // Without a life: the first (tickets of a later life always name it).
        let life = match l {
            None => 1,
            Some(l) => match num(l) {
                Some(l) if l > 1 => l as u64,
                _ => return Err(bad()),
            },
        };
        Ok(Ticket {
            period,
            value,
            token: t.to_owned(),
            life,
        })
    }
}

/// A gap-free number taken: [`Numbers::take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The number's parts.
    pub number: Number,
    /// The number as the sequence prints it (its template, else the integer).
    pub text: String,
    /// What commits or releases it.
    pub ticket: Ticket,
}

/// A number handed out, with its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Formatted {
    /// The number's parts.
    pub number: Number,
    /// As the sequence prints it.
    pub text: String,
}

/// A handle on a numbered sequence: its settings, read once, and where
/// periods are read from (the store's clock, or one given for tests).
#[derive(Debug, Clone)]
pub struct Numbers {
    store: Arc<dyn Store>,
    name: String,
    numbering: Box<Numbering>,
    template: Option<Template>,
    opaque: Option<Box<OpaqueMap>>,
    clock: Option<Arc<dyn Clock>>,
    /// The life of the name the settings were read in
    /// ([`SequenceRow::incarnation`](crate::store::SequenceRow::incarnation);
    /// 0: unknown). Every reservation and take is made in this life only.
    incarnation: u64,
}

impl Numbers {
    /// Opens a handle on numbered sequence `name`.
    ///
    /// # Errors
    /// [`Error::NotFound`] (with similar names) for a missing sequence;
    /// [`Error::WrongKind`] for an ordinary one (create it with a
    /// numbering); [`Error::Corrupt`] for settings this keysmith cannot read.
    pub async fn open(store: Arc<dyn Store>, name: &str) -> Result<Numbers> {
        validate_name(name)?;
        // The row first, then the settings: settings of a later life with
        // this life's incarnation only make every write refused, never the
        // other way round.
        let row = crate::sequence::describe(&*store, name).await?;
        let Some(numbering) = store.read_numbering(name).await? else {
            return Err(Error::WrongKind(format!(
                "sequence {name:?} is an ordinary sequence, not gap-free, periodic, formatted or bit-reversed: take its values with next, or create a sequence with gapless, period, format or bit_reversed set"
            )));
        };
        Ok(Numbers::with_numbering(store, name, numbering)?.in_life(row.incarnation))
    }

    /// A handle from settings already read (with
    /// [`NumberStore::read_numbering`](crate::store::NumberStore::read_numbering)): saves a read.
    ///
    /// # Errors
    /// [`Error::WrongKind`] for a sequence whose values are a residue class
    /// (they come in blocks: open a [`crate::sequence::Sequence`]);
    /// [`Error::Corrupt`] for settings this keysmith cannot read.
    pub fn with_numbering(
        store: Arc<dyn Store>,
        name: &str,
        numbering: Numbering,
    ) -> Result<Numbers> {
        if numbering.is_leader() {
            return Err(crate::sequence::blocks_refused(name, &numbering));
        }
        if let Some(r) = numbering.residue {
            return Err(Error::WrongKind(format!(
                "sequence {name:?} hands out plain integers {} modulo {} in blocks: take them with next (a keysmith::sequence::Sequence in the library)",
                r.offset, r.increment
            )));
        }
        let template = Template::for_numbering(&numbering)
            .map_err(|e| Error::Corrupt(format!("sequence {name:?}: stored {e}")))?;
        let opaque = numbering
            .opaque
            .as_ref()
            .map(|o| OpaqueMap::new(o).map(Box::new))
            .transpose()
            .map_err(|e| Error::Corrupt(format!("sequence {name:?}: stored {e}")))?;
        if let Some(e) = &numbering.encoding {
            e.validate()
                .map_err(|e| Error::Corrupt(format!("sequence {name:?}: stored {e}")))?;
        }
        Ok(Numbers {
            store,
            name: name.to_owned(),
            numbering: Box::new(numbering),
            template,
            opaque,
            clock: None,
            incarnation: 0,
        })
    }

    /// The handle, bound to life `incarnation` of its name (the row's
    /// [`SequenceRow::incarnation`](crate::store::SequenceRow::incarnation),
    /// read before the settings): reservations and takes in another life
    /// are refused as [`Error::Dropped`].
    pub(crate) fn in_life(mut self, incarnation: u64) -> Numbers {
        self.incarnation = incarnation;
        self
    }

    /// Reads periods from `clock` instead of the store's clock: for tests
    /// that cross a period boundary. The store still never goes back to a
    /// period before its current one.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Numbers {
        self.clock = Some(clock);
        self
    }

    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its numbering settings, without secrets ([`Numbering::public`]).
    pub fn numbering(&self) -> Numbering {
        self.numbering.public()
    }

    /// Its template (`None`: plain integers).
    pub fn template(&self) -> Option<&Template> {
        self.template.as_ref()
    }

    /// Whether numbers are printed as text (a template or an encoding)
    /// rather than plain integers.
    pub fn is_formatted(&self) -> bool {
        self.template.is_some() || self.numbering.encoding.is_some()
    }

    /// The period key to ask for: 0 without a period.
    async fn period(&self) -> Result<i64> {
        let Some(p) = self.numbering.period else {
            return Ok(0);
        };
        let ms = match &self.clock {
            Some(c) => c.now_ms(),
            None => self.store.clock_ms().await?,
        };
        p.key_at(ms)
    }

    fn number(&self, period: i64, n: i64) -> Number {
        Number {
            period: self.numbering.period.map(|_| period),
            n,
        }
    }

    /// `number` as the sequence prints it: its template, its encoding, or
    /// the integer. A value too wide for the encoding (never one the
    /// sequence hands out: a numbered sequence's max cannot be raised)
    /// prints as the integer.
    pub fn format(&self, number: &Number) -> String {
        self.text(number).unwrap_or_else(|_| number.n.to_string())
    }

    fn text(&self, number: &Number) -> Result<String> {
        match (&self.template, &self.numbering.encoding) {
            (Some(t), _) => Ok(t.format(number)),
            (None, Some(e)) => e.encode(number.n),
            (None, None) => Ok(number.n.to_string()),
        }
    }

    fn formatted(&self, period: i64, v: i64) -> Result<Formatted> {
        let number = self.number(period, v);
        Ok(Formatted {
            text: self.text(&number)?,
            number,
        })
    }

    /// The value a string or integer this sequence handed out stands for,
    /// and the counter it was made from: an encoded sequence's string (or
    /// its integer), an opaque or bit-reversed sequence's value mapped
    /// back. For an encoded sequence, text starting with its prefix (or,
    /// without a prefix, exactly as long as its strings) is read as an
    /// encoded string, anything else as an integer.
    ///
    /// # Errors
    /// [`Error::WrongKind`] for a sequence with a period or template (use
    /// [`Self::parse`]) or a gap-free one; [`Error::InvalidArgument`] naming
    /// what is wrong with text the sequence never hands out (a wrong
    /// prefix, character, width or check character; a value outside its
    /// range or of a key it does not have).
    pub fn decode(&self, text: &str) -> Result<Decoded> {
        if self.template.is_some() || self.numbering.gapless {
            return Err(Error::WrongKind(format!(
                "sequence {:?} prints formatted or gap-free numbers: use keysmith parse {0} to read them",
                self.name
            )));
        }
        let t = text.trim();
        let shown = || t.chars().take(80).collect::<String>();
        let integer = || t.parse::<i64>().ok().filter(|_| !t.starts_with('+'));
        let value = match &self.numbering.encoding {
            Some(e) if e.looks_encoded(t) => e.decode(t)?,
            Some(e) => match integer() {
                Some(v) => v,
                None => e.decode(t)?,
            },
            None => integer().ok_or_else(|| {
                Error::invalid(format!(
                    "{:?} is not a value of sequence {:?}: it hands out whole numbers",
                    shown(),
                    self.name
                ))
            })?,
        };
        self.decode_value(value)
    }

    /// [`Self::decode`] for a value given as an integer.
    ///
    /// # Errors
    /// As [`Self::decode`].
    pub fn decode_value(&self, value: i64) -> Result<Decoded> {
        if self.template.is_some() || self.numbering.gapless {
            return Err(Error::WrongKind(format!(
                "sequence {:?} prints formatted or gap-free numbers: use keysmith parse {0} to read them",
                self.name
            )));
        }
        let counter = match (&self.opaque, &self.numbering.bit_reversed) {
            (Some(m), _) => m.counter_of(value)?,
            (None, Some(b)) => BitReversal::new(b).counter_of(value)?,
            (None, None) => value,
        };
        Ok(Decoded { value, counter })
    }

    /// The parts of a number this sequence printed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for text the sequence's template does not
    /// write.
    pub fn parse(&self, text: &str) -> Result<Number> {
        match &self.template {
            Some(t) => t.parse_number(text),
            None => text
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0 && n.to_string() == text)
                .map(|n| Number { period: None, n })
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{text:?} is not a number of sequence {:?}: it prints plain integers",
                        self.name
                    ))
                }),
        }
    }

    /// `n` numbers (`1..=MAX_RESERVATION`) of the current period, all of
    /// one period, in one store round trip (two with a period on
    /// PostgreSQL: its clock, then the reservation).
    ///
    /// # Errors
    /// [`Error::WrongKind`] for a gap-free sequence (take tickets);
    /// [`Error::InvalidArgument`] for a bad `n`; [`Error::Exhausted`] when fewer than `n` numbers are left in
    /// the period (those left are skipped: a gap, never a duplicate);
    /// [`Error::NotFound`], [`Error::Unavailable`].
    pub async fn next_n(&self, n: i64) -> Result<Vec<Formatted>> {
        if self.numbering.gapless {
            return Err(crate::sequence::blocks_refused(&self.name, &self.numbering));
        }
        crate::store::check_count("count", n)?;
        let period = self.period().await?;
        if let Some(b) = &self.numbering.bit_reversed {
            return self.next_reversed(BitReversal::new(b), period, n).await;
        }
        if let Some(m) = &self.opaque {
            return self.next_opaque(m, period, n).await;
        }
        let r = self
            .store
            .reserve_numbers_in(&self.name, period, n, self.incarnation)
            .await?;
        if r.end - r.start < n {
            let max = crate::sequence::describe(&*self.store, &self.name)
                .await
                .map_or(r.end - 1, |row| row.max);
            return Err(Error::Exhausted {
                name: self.name.clone(),
                max,
            });
        }
        (r.start..r.end)
            .map(|v| self.formatted(r.period, v))
            .collect()
    }

    /// `n` values of an opaque sequence: the reserved counters mapped by
    /// the newest key. A counter past the key's range (a max raised by
    /// hand in the store) is refused as exhaustion: a gap, never a repeat.
    async fn next_opaque(&self, m: &OpaqueMap, period: i64, n: i64) -> Result<Vec<Formatted>> {
        let r = self
            .store
            .reserve_numbers_in(&self.name, period, n, self.incarnation)
            .await?;
        let exhausted = || Error::Exhausted {
            name: self.name.clone(),
            max: m.counter_max(),
        };
        if r.end - r.start < n || r.end - 1 > m.counter_max() {
            return Err(exhausted());
        }
        (r.start..r.end)
            .map(|c| {
                let v = m.value_of(c).map_err(|_| exhausted())?;
                self.formatted(r.period, v)
            })
            .collect()
    }

    /// `n` values of a bit-reversed sequence: the reversals of reserved
    /// counters, those in the skip range left out (a gap) and made up for
    /// by more reservations. The skip range holds at most half of the
    /// values, so few rounds are needed; the bound is a guard.
    async fn next_reversed(&self, r: BitReversal, period: i64, n: i64) -> Result<Vec<Formatted>> {
        const MAX_ROUNDS: usize = 64;
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..MAX_ROUNDS {
            let need = n - out.len() as i64;
            let got = self
                .store
                .reserve_numbers_in(&self.name, period, need, self.incarnation)
                .await?;
            for v in (got.start..got.end).filter_map(|c| r.value_of(c)) {
                out.push(self.formatted(got.period, v)?);
            }
            if got.end - got.start < need {
                let max = crate::sequence::describe(&*self.store, &self.name)
                    .await
                    .map_or(got.end - 1, |row| row.max);
                return Err(Error::Exhausted {
                    name: self.name.clone(),
                    max,
                });
            }
            if out.len() as i64 == n {
                return Ok(out);
            }
        }
        Err(Error::Contention {
            name: self.name.clone(),
            attempts: MAX_ROUNDS as u32,
        })
    }

    /// The counter a value of a bit-reversed sequence was made from.
    ///
    /// # Errors
    /// [`Error::WrongKind`] for a sequence that is not bit-reversed;
    /// [`Error::InvalidArgument`] for a value it never hands out.
    pub fn decode_reversed(&self, value: i64) -> Result<i64> {
        let Some(b) = &self.numbering.bit_reversed else {
            return Err(Error::WrongKind(format!(
                "sequence {:?} is not bit-reversed (create one with bit_reversed set)",
                self.name
            )));
        };
        BitReversal::new(b).counter_of(value)
    }

    /// Takes a gap-free number with a ticket valid for `ttl` (by the
    /// store's clock): the lowest number of the current period that was
    /// released or whose ticket expired, else the next new one. Commit it
    /// with [`Self::commit`] or free it with [`Self::release`].
    ///
    /// # Errors
    /// [`Error::WrongKind`] for a sequence that is not gap-free;
    /// [`Error::InvalidArgument`] for a TTL outside 1 ms..=[`MAX_TICKET_TTL`]; [`Error::Exhausted`];
    /// [`Error::NotFound`]; [`Error::Unavailable`].
    pub async fn take(&self, ttl: Duration) -> Result<Taken> {
        if !self.numbering.gapless {
            return Err(Error::WrongKind(format!(
                "sequence {:?} is not gap-free: take its values with next, or create a sequence with gapless set to take numbers with tickets",
                self.name
            )));
        }
        check_ttl(ttl)?;
        let period = self.period().await?;
        let token = hex(&rand::random::<[u8; 16]>());
        let take = TicketTake {
            name: &self.name,
            period,
            token: &token,
            ttl,
            incarnation: self.incarnation,
        };
        let taken = self.store.take_ticket_in(&take).await?;
        let number = self.number(taken.period, taken.value);
        Ok(Taken {
            text: self.format(&number),
            number,
            ticket: Ticket::new(taken, token, self.incarnation),
        })
    }

    fn ticket(&self, ticket: &str) -> Result<Ticket> {
        self.has_tickets()?;
        ticket.parse()
    }

    fn has_tickets(&self) -> Result<()> {
        if self.numbering.gapless {
            Ok(())
        } else {
            Err(Error::WrongKind(format!(
                "sequence {:?} is not gap-free: it has no tickets",
                self.name
            )))
        }
    }

    /// Makes the ticket's number final. Refused, changing nothing, when the
    /// number was committed or released already, or its ticket expired and
    /// another holder took it.
    ///
    /// # Errors
    /// [`Error::TicketRefused`]; [`Error::InvalidArgument`] for a string
    /// that is not a ticket; [`Error::WrongKind`] for a sequence that is not
    /// gap-free; [`Error::NotFound`]; [`Error::Unavailable`].
    pub async fn commit(&self, ticket: &str) -> Result<Formatted> {
        self.commit_ticket(&self.ticket(ticket)?).await
    }

    /// [`Self::commit`] for a [`Ticket`] already parsed (as [`Self::take`]
    /// returns it).
    ///
    /// # Errors
    /// As [`Self::commit`].
    pub async fn commit_ticket(&self, t: &Ticket) -> Result<Formatted> {
        self.has_tickets()?;
        self.check_ticket_life(t)?;
        let settled = self
            .store
            .commit_ticket(&self.name, t.period, t.value, &t.token)
            .await;
        self.settled(t, settled).await?;
        let number = self.number(t.period, t.value);
        Ok(Formatted {
            text: self.format(&number),
            number,
        })
    }

    /// Frees the ticket's number: it is the next one taken (the lowest
    /// free one of the period is taken first). Refused as [`Self::commit`].
    ///
    /// # Errors
    /// As [`Self::commit`].
    pub async fn release(&self, ticket: &str) -> Result<Formatted> {
        self.release_ticket(&self.ticket(ticket)?).await
    }

    /// [`Self::release`] for a [`Ticket`] already parsed.
    ///
    /// # Errors
    /// As [`Self::commit`].
    pub async fn release_ticket(&self, t: &Ticket) -> Result<Formatted> {
        self.has_tickets()?;
        self.check_ticket_life(t)?;
        let settled = self
            .store
            .release_ticket(&self.name, t.period, t.value, &t.token)
            .await;
        self.settled(t, settled).await?;
        let number = self.number(t.period, t.value);
        Ok(Formatted {
            text: self.format(&number),
            number,
        })
    }
}

impl Numbers {
    fn dropped(&self) -> Error {
        Error::Dropped {
            kind: "sequence",
            name: self.name.clone(),
            held: "ticket",
        }
    }

    /// A ticket of another life than this handle's is refused before the
    /// store is asked: its number is not this life's.
    fn check_ticket_life(&self, t: &Ticket) -> Result<()> {
        if t.life != 0 && self.incarnation != 0 && t.life != self.incarnation {
            return Err(self.dropped());
        }
        Ok(())
    }

    /// What a settlement answered, with a refusal explained: a ticket of a
    /// life the name is no longer in (dropped and created again since this
    /// handle was opened) is [`Error::Dropped`]. Nothing was changed either
    /// way (the tickets of a dropped life went with it).
    async fn settled(&self, t: &Ticket, settled: Result<()>) -> Result<()> {
        match settled {
            Err(Error::TicketRefused(why)) => {
                match crate::sequence::describe(&*self.store, &self.name).await {
                    Ok(row) if t.life != 0 && row.incarnation != 0 && row.incarnation != t.life => {
                        Err(self.dropped())
                    }
                    _ => Err(Error::TicketRefused(why)),
                }
            }
            other => other,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values before and after every rotation (up to the 16th key) are all
    /// distinct and decode to their counters; a handle opened before a
    /// rotation keeps making values that never collide with the new key's.
    #[tokio::test]
    async fn rotation_keeps_every_value_unique_and_decodable() {
        let store: Arc<dyn Store> = crate::store::open("memory://").await.unwrap();
        let n = Numbering {
            opaque: Some(Opaque::default()),
            encoding: Some(Encoding::new(Alphabet::Base32, Some("ord")).unwrap()),
            ..Numbering::default()
        };
        create(
            &*store,
            &SequenceSpec {
                max: 16 * 2000,
                ..SequenceSpec::new("o")
            },
            &n,
        )
        .await
        .unwrap();
        let stale = Numbers::open(store.clone(), "o").await.unwrap();
        let mut seen = std::collections::HashMap::new();
        for round in 0..KEY_SLOTS {
            if round > 0 {
                let shown = rotate_key(&*store, "o").await.unwrap();
                let keys = &shown.opaque.as_ref().unwrap().keys;
                assert_eq!(keys.len() as i64, round + 1);
                assert!(
                    keys.iter().all(|k| !k.has_secret()),
                    "the answer shows no key"
                );
            }
            let h = Numbers::open(store.clone(), "o").await.unwrap();
            for f in h
                .next_n(20)
                .await
                .unwrap()
                .into_iter()
                .chain(stale.next_n(5).await.unwrap())
            {
                assert!(
                    seen.insert(f.text.clone(), f.number.n).is_none(),
                    "{} twice",
                    f.text
                );
            }
            for text in seen.keys() {
                assert!(h.decode(text).unwrap().counter >= 1);
            }
        }
        let counters: std::collections::HashSet<i64> = {
            let h = Numbers::open(store.clone(), "o").await.unwrap();
            seen.keys().map(|t| h.decode(t).unwrap().counter).collect()
        };
        assert_eq!(counters.len(), seen.len(), "two values, one counter");
        let e = rotate_key(&*store, "o").await.unwrap_err().to_string();
        assert!(e.contains("all of its 16 keys"), "{e}");
        crate::sequence::create(&*store, &SequenceSpec::new("plain"))
            .await
            .unwrap();
        assert!(matches!(
            rotate_key(&*store, "plain").await,
            Err(Error::WrongKind(_))
        ));
    }

    #[test]
    fn tickets_round_trip_and_refuse_junk() {
        let t: Ticket = "20261123-42-0123456789abcdef0123456789abcdef"
            .parse()
            .unwrap();
        assert_eq!((t.period, t.value), (20261123, 42));
        assert_eq!(
            t.to_string(),
            "20261123-42-0123456789abcdef0123456789abcdef"
        );
        assert_eq!(t.life(), 1);
        let later: Ticket = "0-42-0123456789abcdef0123456789abcdef-7".parse().unwrap();
        assert_eq!((later.value, later.life()), (42, 7));
        assert_eq!(later.to_string(), "0-42-0123456789abcdef0123456789abcdef-7");
        for bad in [
            "0-42-0123456789abcdef0123456789abcdef-0",
            "0-42-0123456789abcdef0123456789abcdef-x",
            "0-42-0123456789abcdef0123456789abcdef-",
            "0-42-0123456789abcdef0123456789abcdef-7-7",
            "",
            "42",
            "0-42-xyz",
            "0-42-0123456789ABCDEF0123456789abcdef",
            "0--0123456789abcdef0123456789abcdef",
            "0-42-0123456789abcdef0123456789abcdef-1",
            "-1-42-0123456789abcdef0123456789abcdef",
            "0-99999999999999999999-0123456789abcdef0123456789abcdef",
        ] {
            let e = bad.parse::<Ticket>().unwrap_err().to_string();
            assert!(e.contains("not a ticket"), "{bad}: {e}");
        }
    }
}
