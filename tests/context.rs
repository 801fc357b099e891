//! VITA-49/DIFI context packets through the source: a retune mid-stream gives one `rx_rate`
//! and one `rx_freq` tag at the first sample after it and one `context` message; context
//! packets that repeat the same settings give nothing.

use std::time::Duration;

use fsdr_net::io::emulator::{ContextPlan, Emulator, EmulatorConfig, Signal};
use fsdr_net::prelude::*;
use futuresdr::num_complex::Complex32;
use futuresdr::runtime::dev::prelude::*;

/// Collects the setting tags (name, item index, value) of a stream.
#[derive(Block)]
struct SettingTags {
    #[input]
    input: DefaultCpuReader<Complex32>,
    items: usize,
    tags: Vec<(String, usize, f64)>,
}

impl Kernel for SettingTags {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        for t in tags.iter() {
            if let Tag::NamedAny(name, v) = &t.tag {
                if let Some(v) = v.downcast_ref::<f64>() {
                    self.tags.push((name.clone(), self.items + t.index, *v));
                }
                // A time tag, by its tick rate.
                if let Some(t2) = v.downcast_ref::<RxTime>() {
                    self.tags
                        .push((name.clone(), self.items + t.index, t2.tick_rate));
                }
            }
        }
        let n = items.len();
        self.items += n;
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

#[test]
fn a_retune_is_one_tag_per_setting_at_the_right_sample_and_one_message() -> Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    const SPP: u64 = 500;
    let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .sample_rate(10e6)
        .stats_interval(None)
        .finish_after_idle(Duration::from_millis(300))
        .first_datagram_within(Duration::from_secs(10))
        .build()?;
    let mut emu = EmulatorConfig::new(src.local_addr(), Format::Vrt);
    emu.rate = 10e6;
    emu.tick_rate = 10e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(100 * SPP);
    emu.signal = Signal::Ramp;
    emu.context = Some(ContextPlan {
        every: 10,
        rf_freq: 915e6,
        gain_db: 20.0,
        retune: Some((60, 5e6, 2.4e9)),
        difi: true,
    });
    let snk = SettingTags {
        input: DefaultCpuReader::default(),
        items: 0,
        tags: Vec::new(),
    };
    let messages = MessageCollector::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk; src.context | messages);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        Emulator::new(emu).unwrap().run().unwrap()
    });
    let fg = Runtime::new().run(fg)?;
    let sent = sender.join().unwrap();
    assert_eq!(sent.context_sent, 11, "{sent:?}");
    let snk = fg.block(&snk)?;
    let at = |name: &str| -> Vec<(usize, f64)> {
        snk.tags
            .iter()
            .filter(|t| t.0 == name)
            .map(|t| (t.1, t.2))
            .collect()
    };
    let retune = (60 * SPP) as usize;
    assert_eq!(at("rx_rate"), [(0, 10e6), (retune, 5e6)]);
    assert_eq!(at("rx_freq"), [(0, 915e6), (retune, 2.4e9)]);
    assert_eq!(at("rx_bandwidth"), [(0, 8e6), (retune, 4e6)]);
    // Time is told in the new rate from the retune on (review, first hour, item 4).
    assert_eq!(at("rx_time"), [(0, 10e6), (retune, 5e6)]);
    // The gain did not change: tagged once.
    assert_eq!(at("rx_gain"), [(0, 20.0)]);
    let got = fg.block(&messages)?.messages().to_vec();
    assert_eq!(got.len(), 2, "the first context and the retune: {got:?}");
    let Pmt::MapStrPmt(m) = &got[1] else {
        panic!("{:?}", got[1])
    };
    assert_eq!(m.get("rf_freq"), Some(&Pmt::F64(2.4e9)));
    assert_eq!(m.get("sample_rate"), Some(&Pmt::F64(5e6)));
    assert_eq!(m.get("changed"), Some(&Pmt::Bool(true)));
    // Context packets are not samples and not losses.
    let s = fg.block(&src)?.stats();
    assert_eq!(s.stream.items, sent.samples_sent);
    assert_eq!(
        (s.missed, s.malformed, s.skipped),
        (0, 0, 0),
        "{}",
        s.engine
    );
    Ok(())
}
