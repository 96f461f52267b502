//! The engine's tests: completion order, several fences, errors, the worker's state, and a
//! unit that hands over a network only once its devices finished it.

use burn::tensor::Tensor;

use super::*;

#[test]
fn a_failed_unit_fails_its_handle_and_every_later_one_with_its_own_variant() {
    let device = Device::flex();
    let engine = Engine::new(0u32, Some(device.clone()));
    let d = device.clone();
    let ok = engine.issue(move |_| Ok(Tensor::<1>::ones([2], &d)));
    let bad = engine.issue(|_| -> Result<Tensor<1>> {
        Err(Error::InvalidValue {
            name: "test",
            value: "x".into(),
            reason: "injected".into(),
        })
    });
    let d = device.clone();
    let later = engine.issue(move |_| Ok(Tensor::<1>::ones([2], &d)));
    assert_eq!(ok.wait().unwrap().mean().into_scalar::<f32>(), 1.0);
    let err = bad.wait().unwrap_err();
    assert!(
        matches!(err, Error::InvalidValue { name: "test", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("injected"));
    let err = later.wait().unwrap_err();
    assert!(err.to_string().contains("earlier unit failed"), "{err}");
    assert!(
        matches!(err.root(), Error::InvalidValue { name: "test", .. }),
        "{err}"
    );
    assert!(engine.wait_all().is_err());
}

/// Two fences, as a unit on two devices returns them.
struct Shares(Vec<Tensor<1>>);

impl Computed for Shares {
    type Value = Vec<f32>;
    fn fences(&self) -> Vec<Tensor<1>> {
        self.0.clone()
    }
    fn value(self, means: &[f32]) -> Vec<f32> {
        means.to_vec()
    }
}

#[test]
fn a_unit_with_several_fences_is_done_when_all_are_and_hands_each_mean_over() {
    let device = Device::flex();
    let engine = Engine::new((), None);
    let d = device.clone();
    let handle = engine.issue(move |_| {
        Ok(Shares(vec![
            Tensor::<1>::ones([3], &d),
            Tensor::<1>::full([1], 4.0, &d),
        ]))
    });
    let done = handle.wait_completed().unwrap();
    assert_eq!(done.value, vec![1.0, 4.0]);
    assert_eq!(done.devices.len(), 2);
    assert_eq!(done.at, *done.devices.iter().max().unwrap());
}

#[test]
fn a_unit_returns_host_values_and_the_state_itself_in_issue_order() {
    let device = Device::flex();
    let engine = Engine::new(Tensor::<1>::zeros([4], &device), None);
    let add = engine.issue(|acc: &mut Tensor<1>| {
        *acc = acc.clone().add_scalar(2.0);
        Ok(acc.clone())
    });
    let count = engine.issue(|acc: &mut Tensor<1>| Ok(acc.dims()[0] as u64));
    let snapshot = engine.issue(|acc: &mut Tensor<1>| Ok(Host(acc.clone().into_data())));
    assert_eq!(count.wait().unwrap(), 4);
    assert!(add.is_done(), "completions are published in issue order");
    let data = snapshot.wait().unwrap();
    assert_eq!(data.try_to_vec::<f32>().unwrap(), vec![2.0; 4]);
    assert!(snapshot.wait_completed().unwrap().devices.is_empty());
}

/// Replaces each matrix `w` of a module by `w` multiplied `times` times by a fixed matrix
/// that keeps its scale: a long update, queued on the device.
struct Products(usize);

impl burn::module::ModuleMapper for Products {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<Tensor<D>>,
    ) -> burn::module::Param<Tensor<D>> {
        let times = self.0;
        param.map(|w| {
            let dims = w.dims();
            if D != 2 || dims[0] != dims[1] {
                return w;
            }
            let n = dims[0];
            let device = w.device();
            let mix = Tensor::<2>::eye(n, &device)
                .mul_scalar(0.5)
                .add_scalar(0.5 / n as f64);
            let mut m: Tensor<2> = w.reshape([n, n]);
            for _ in 0..times {
                m = m.matmul(mix.clone());
            }
            m.reshape(dims)
        })
    }
}

/// A network a unit hands back has been computed when its handle completes: the caller
/// computes with it on its own thread (an evaluation, a file written), and on a CUDA card
/// that thread issues on a stream of its own, which cubecl makes wait for the worker's
/// in-place writes only in part (issue 61). On lavapipe, which runs wgpu's kernels on the
/// CPU: a unit queues a long update of the weights, the next hands the network back, and
/// reading its weights on this thread then finds nothing of that update left to wait for.
#[test]
fn a_network_handed_back_has_been_computed_when_its_handle_completes() {
    use crate::{Block, Dense, Init};
    use burn::module::Module;

    let device = Device::wgpu(burn::tensor::DeviceKind::DefaultDevice);
    let n = 768;
    let net = Dense::new(n)
        .in_units(n)
        .initialize(Init::default(), &device)
        .infer_shape(Tensor::<2>::zeros([1, n], &device))
        .unwrap();
    let engine = Engine::new(net, None);
    // The kernels compiled and the memory reserved before the clock starts.
    engine
        .issue(|net: &mut Dense| {
            *net = net.clone().map(&mut Products(1));
            Ok(())
        })
        .wait()
        .unwrap();
    let d = device.clone();
    engine
        .issue(move |_: &mut Dense| d.sync().map_err(|e| Error::Execution(format!("{e:?}"))))
        .wait()
        .unwrap();
    let started = Instant::now();
    engine.issue(|net: &mut Dense| {
        *net = net.clone().map(&mut Products(24));
        Ok(())
    });
    let snapshot = engine
        .issue(|net: &mut Dense| Ok(net.clone()))
        .wait()
        .unwrap();
    let handed = started.elapsed();
    let reading = Instant::now();
    let weight = snapshot.linear().expect("created").weight.val();
    let values = weight.into_data().try_to_vec::<f32>().unwrap();
    let read = reading.elapsed();
    assert!(values.iter().all(|v| v.is_finite()));
    // Before: the handle completed at once (a network had no fence) and the read waited for
    // the whole update; now the handle waits for it and the read is a copy.
    assert!(
        read * 4 < handed,
        "the handle completed {handed:?} after the update was queued, and the read then \
         took {read:?}: the update was still running under the read"
    );
    engine.finish().unwrap();
}

#[test]
fn a_panicking_unit_is_an_error_not_a_crash() {
    // On flex the backend runs on a rayon pool of its own (`kernels::one_pool`).
    for device in [None, Some(Device::flex())] {
        let engine = Engine::new((), device.clone());
        let h = engine.issue(|_| -> Result<Tensor<1>> { panic!("boom") });
        let err = h.wait().unwrap_err();
        assert!(
            matches!(&err, Error::Panic(text) if text.contains("boom")),
            "{device:?}: {err}"
        );
        assert!(engine.finish().is_err(), "{device:?}");
    }
}

/// What a unit on the backend sees: how many threads its parallel work may use, whether a
/// parallel loop in it ran on any other thread, its thread's name, and its OpenMP team's width.
#[cfg(feature = "onednn")]
fn rayon_seen(engine: &Engine<()>) -> (usize, bool, Option<String>, usize) {
    use rayon::prelude::*;
    let handle = engine.issue(|_| {
        let me = thread::current().id();
        let elsewhere = (0..64).into_par_iter().any(|_| {
            thread::sleep(std::time::Duration::from_millis(1));
            thread::current().id() != me
        });
        let name = thread::current().name().map(str::to_string);
        let team = crate::kernels::openmp_width();
        Ok(Host((rayon::current_num_threads(), elsewhere, name, team)))
    });
    handle.wait().unwrap()
}

#[cfg(feature = "onednn")]
#[test]
fn a_backend_on_flex_keeps_burn_flexs_parallel_work_on_its_own_thread_beside_onednns_team() {
    use crate::kernels::{Kernels, ONE_POOL_UP_TO_WIDTH, openmp_width, status};
    assert_eq!(
        status().kernels,
        Kernels::OneDnn,
        "oneDNN must open: the backend shares the cores with its team"
    );
    let (global, width) = (rayon::current_num_threads(), openmp_width());
    // On the machines measured (2 cores, CI's) the backend is its own pool; on wider ones it
    // keeps rayon's.
    let own = (2..=ONE_POOL_UP_TO_WIDTH).contains(&width);
    assert!(
        global > 1,
        "rayon has {global} thread(s) (RAYON_NUM_THREADS?)"
    );
    for device in [Device::flex(), Device::flex().autodiff()] {
        let (threads, elsewhere, name, team) = rayon_seen(&Engine::new((), Some(device.clone())));
        match own {
            true => assert_eq!((threads, elsewhere), (1, false), "{device:?}"),
            false => assert_eq!((threads, elsewhere), (global, true), "{device:?}"),
        }
        // oneDNN's team keeps its width: it is what the pool makes room for.
        assert_eq!(team, width, "{device:?}");
        // The panic hook of the `ember` binary knows the backend by this name.
        assert_eq!(name.as_deref(), Some("ember-backend"), "{device:?}");
    }
    // An engine of no device leaves burn-flex's work to rayon's global pool.
    let (threads, elsewhere, _, _) = rayon_seen(&Engine::new((), None));
    assert_eq!((threads, elsewhere), (global, true));
}

#[test]
fn a_device_without_a_pool_gets_no_sampler_and_its_units_read_none() {
    for device in [Device::flex(), Device::flex().autodiff()] {
        let engine = Engine::new((), Some(device.clone()));
        assert!(engine.sampler.is_none(), "{device:?}");
        let d = device.clone();
        let handle = engine.issue(move |_| Ok(Tensor::<1>::ones([2], &d)));
        assert_eq!(handle.wait().unwrap().mean().into_scalar::<f32>(), 1.0);
        assert_eq!(handle.pool(), None, "{device:?}");
        engine.finish().unwrap();
    }
    // Another backend's device is sampled, on a thread of its own (ndarray keeps no pool
    // either, but only flex is known not to without asking).
    #[allow(deprecated)]
    let engine = Engine::new((), Some(Device::ndarray()));
    assert!(engine.sampler.is_some());
    let handle = engine.issue(|_| Ok(Host(3u64)));
    assert_eq!((handle.wait().unwrap(), handle.pool()), (3, None));
    engine.finish().unwrap();
}
