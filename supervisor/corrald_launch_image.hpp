#pragma once
// The corrald-launch program corrald carries (corrald_launch_main.cpp; the bytes come from the
// build: corrald_launch_image.cmake), which it runs as its launch zygote.
#include <span>

namespace corral {

std::span<const unsigned char> corrald_launch_image();

}  // namespace corral
