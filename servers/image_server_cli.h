// The command line shared by serve-imagenet-shards and serve-imagenet-dir.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "pipeline/image_server.h"
#include "tensorcom/programs/curve_options.h"

namespace tensorcom::pipeline {

// The reference's options that its two servers spell, or default,
// differently; each is taken here with the reference's meaning.
struct ReferenceFlags {
  const char* parallel = "parallel,p";  // processes there, decoding threads here (-p shards, -P dir)
  bool num_workers = false;             // -N/--num-workers, the DataLoader's workers there (shards)
  bool normalize = false;               // -n/--normalize: float32 normalised (dir)
  // shards: shuffled unless --shuffle 0, -S a bare --shuffle; dir: in
  // directory order unless -S (the reference's --no-shuffle) or --shuffle.
  bool shuffle_by_default = true;
};

// Options both servers take; the caller adds its source options.
struct ImageServerCli {
  ImageServerCli(const char* program, const char* usage, ReferenceFlags reference);

  boost::program_options::options_description options;
  // Parses argv; returns false if --help was printed. Installs the frame's
  // stop handlers, which end serving with a summary.
  [[nodiscard]] bool parse(int argc, char** argv);
  [[nodiscard]] const boost::program_options::variables_map& vars() const { return vars_; }
  ImageServerOptions server;

 private:
  void add_reference_options();
  // After parsing: the option values checked and turned into `server`.
  void finish();
  void finish_workers();
  void finish_shuffle();
  void finish_connection();
  void finish_augment();
  void finish_val_resize();
  void finish_policy();
  void finish_color_jitter();
  void finish_random_erase();
  void finish_format();
  void finish_mix();
  void finish_repeats();
  void finish_size_schedule();
  void check_bounds() const;
  boost::program_options::variables_map vars_;
  std::string layout_ = "BHWC";
  std::string dtype_ = "uint8";
  std::string wire_ = "raw";
  std::string interpolation_ = "bilinear";
  std::string auto_augment_;  // empty: no policy
  std::string timm_aa_;       // --aa: timm's RandAugment string; empty: none
  int ra_magnitude_ = 9;      // RandAugment's magnitude bin
  int ra_num_ops_ = 2;        // RandAugment's operations an image
  std::string policy_interpolation_ = "bilinear";
  std::string color_jitter_;              // B[,C,S[,H]]; empty: none
  double random_erase_ = 0;               // RandomErasing's probability
  std::string random_erase_value_ = "0";  // 0 or random
  std::string size_schedule_;             // --size-schedule as given; empty: none
  int val_resize_ = 0;                    // --val-resize: the shorter side (0: size * 256 / 224)
  double crop_pct_ = 0;                   // --crop-pct: timm's (0: none)
  double mixup_alpha_ = 0;                // MixUp's alpha (0: off)
  double cutmix_alpha_ = 0;               // CutMix's alpha (0: off)
  std::string cutmix_minmax_;             // timm's MIN,MAX; empty: none
  std::string mix_mode_ = "torchvision";  // torchvision, batch, pair or elem
  double mix_prob_ = 1;                   // timm's prob
  double mix_switch_prob_ = 0.5;          // CutMix rather than MixUp when both
  std::string mean_;
  std::string std_;
  std::int64_t linger_ms_ = 10000;
  double delivery_timeout_s_ = 60;
  double wait_for_receiver_s_ = 120;
  ReferenceFlags reference_;
  std::int64_t parallel_ = 0;     // the reference's -p/-P
  std::int64_t num_workers_ = 0;  // the reference's -N
  bool shuffle_switch_ = false;   // dir's -S/--no-shuffle
  bool normalize_ = false;        // dir's -n/--normalize
  programs::CurveFlags curve_;
};

}  // namespace tensorcom::pipeline
