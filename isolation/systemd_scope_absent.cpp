// scope_requester() for binaries linked without libsystemd (the static `corral`): none, so
// place_cgroups reports that this binary cannot ask systemd (systemd_scope.hpp).
#include "isolation/systemd_scope.hpp"

namespace corral {

ScopeRequester scope_requester() {
    return {};
}

}  // namespace corral
